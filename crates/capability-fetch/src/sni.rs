//! The name a TLS client asks for, read from its first record in a CONNECT tunnel, so that the
//! egress proxy decides on it as on the tunnel's target (docs/isolation-model.md, "The egress
//! proxy").
//!
//! The proxy decides on the host a CONNECT names, and connects to it; what the child then sends
//! through the tunnel is its own. A server that serves many names at one address (a content
//! network, a shared front) routes a TLS connection by the name in its ClientHello (SNI), so a
//! child could ask the allowed host's address for a name the personality never allowed. The
//! first record of a tunnel that starts like TLS is therefore read whole before anything is
//! forwarded, and its name must be allowed too.

use tokio::io::{AsyncRead, AsyncReadExt};

/// A TLS record's header: type, version, length.
const HEADER: usize = 5;
/// The longest plaintext record TLS allows (2^14 bytes).
const MAX_RECORD: usize = 1 << 14;
/// A handshake record.
const HANDSHAKE: u8 = 22;
/// A ClientHello handshake message.
const CLIENT_HELLO: u8 = 1;
/// The `server_name` extension.
const SERVER_NAME: u16 = 0;

/// What a tunnel's first bytes are.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Opening {
    /// Not TLS: forwarded as it is, the tunnel's target being the only decision.
    NotTls,
    /// A whole ClientHello, with the name it asks for if it names one.
    Hello(Option<String>),
}

/// Reads the first record of a tunnel from `client` into `first` (everything read, to forward
/// once decided, in one piece: a tunnel's first bytes reach the server as they left the child)
/// and says what it is. A record that starts like TLS but is not a whole ClientHello in one
/// record (cut short, longer than TLS allows, or a ClientHello spread over records) is an
/// error: its name cannot be known, so it is refused.
pub(crate) async fn opening<R: AsyncRead + Unpin>(
    client: &mut R,
    first: &mut Vec<u8>,
) -> Result<Opening, String> {
    if more(client, first).await? == 0 || first[0] != HANDSHAKE {
        return Ok(Opening::NotTls);
    }
    let cut_short = || "a TLS record cut short".to_owned();
    while first.len() < HEADER {
        if more(client, first).await? == 0 {
            return Err(cut_short());
        }
    }
    let length = usize::from(u16::from_be_bytes([first[3], first[4]]));
    if length > MAX_RECORD {
        return Err(format!(
            "a TLS record of {length} bytes, more than TLS allows"
        ));
    }
    while first.len() < HEADER + length {
        if more(client, first).await? == 0 {
            return Err(cut_short());
        }
    }
    server_name(&first[HEADER..HEADER + length]).map(Opening::Hello)
}

/// Reads what `client` has sent next onto the end of `first`: how many bytes, 0 at its end.
async fn more<R: AsyncRead + Unpin>(client: &mut R, first: &mut Vec<u8>) -> Result<usize, String> {
    first.reserve(4096);
    client.read_buf(first).await.map_err(|e| e.to_string())
}

/// The host name a ClientHello (`record`, a handshake record's content) asks for, if any.
pub(crate) fn server_name(record: &[u8]) -> Result<Option<String>, String> {
    let mut r = Reader(record);
    if r.u8()? != CLIENT_HELLO {
        return Err("the first TLS message is not a ClientHello".to_owned());
    }
    let length = r.u24()?;
    if length != r.0.len() {
        return Err("a ClientHello that does not fill its one record".to_owned());
    }
    r.skip(2 + 32)?; // version, random
    let session = usize::from(r.u8()?);
    r.skip(session)?;
    let suites = usize::from(r.u16()?);
    r.skip(suites)?;
    let compression = usize::from(r.u8()?);
    r.skip(compression)?;
    if r.0.is_empty() {
        return Ok(None);
    }
    let extensions = usize::from(r.u16()?);
    let mut ext = Reader(r.take(extensions)?);
    let mut name = None;
    while !ext.0.is_empty() {
        let kind = ext.u16()?;
        let len = usize::from(ext.u16()?);
        let body = ext.take(len)?;
        if kind != SERVER_NAME {
            continue;
        }
        if name.is_some() {
            return Err("a ClientHello with two server_name extensions".to_owned());
        }
        let mut list = Reader(body);
        let list_len = usize::from(list.u16()?);
        let mut entries = Reader(list.take(list_len)?);
        while !entries.0.is_empty() {
            let name_type = entries.u8()?;
            let len = usize::from(entries.u16()?);
            let bytes = entries.take(len)?;
            // Host names are the only type TLS defines; another is refused, not skipped.
            if name_type != 0 || name.is_some() {
                return Err("a server_name extension with other than one host name".to_owned());
            }
            let text = std::str::from_utf8(bytes)
                .ok()
                .filter(|t| !t.is_empty() && t.is_ascii())
                .ok_or("a server name that is not an ASCII host name")?;
            name = Some(text.to_ascii_lowercase());
        }
    }
    Ok(name)
}

/// Big-endian fields read off the front of a slice; past its end is an error.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.0.len() {
            return Err("a ClientHello cut short".to_owned());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn skip(&mut self, n: usize) -> Result<(), String> {
        self.take(n).map(drop)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u24(&mut self) -> Result<usize, String> {
        let b = self.take(3)?;
        Ok(usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ClientHello record naming `name` (none for `None`).
    pub(crate) fn hello(name: Option<&str>) -> Vec<u8> {
        let mut extensions = Vec::new();
        if let Some(name) = name {
            let n = name.len() as u16;
            extensions.extend_from_slice(&SERVER_NAME.to_be_bytes());
            extensions.extend_from_slice(&(n + 5).to_be_bytes());
            extensions.extend_from_slice(&(n + 3).to_be_bytes());
            extensions.push(0);
            extensions.extend_from_slice(&n.to_be_bytes());
            extensions.extend_from_slice(name.as_bytes());
        }
        // Another extension after it (supported_versions), as real clients send.
        extensions.extend_from_slice(&[0x00, 0x2b, 0x00, 0x03, 0x02, 0x03, 0x04]);
        let mut body = vec![0x03, 0x03];
        body.extend_from_slice(&[7u8; 32]);
        body.push(0);
        body.extend_from_slice(&[0x00, 0x02, 0x13, 0x01, 0x01, 0x00]);
        body.extend_from_slice(&(extensions.len() as u16).to_be_bytes());
        body.extend_from_slice(&extensions);
        let mut message = vec![CLIENT_HELLO];
        message.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        message.extend_from_slice(&body);
        let mut record = vec![HANDSHAKE, 0x03, 0x01];
        record.extend_from_slice(&(message.len() as u16).to_be_bytes());
        record.extend_from_slice(&message);
        record
    }

    #[tokio::test]
    async fn the_name_a_client_asks_for_is_read_and_anything_unclear_is_refused() {
        let read = |bytes: Vec<u8>| async move {
            let mut first = Vec::new();
            let got = opening(&mut bytes.as_slice(), &mut first).await;
            (got, first)
        };
        let (got, first) = read(hello(Some("API.example.com"))).await;
        assert_eq!(got, Ok(Opening::Hello(Some("api.example.com".to_owned()))));
        assert_eq!(
            first,
            hello(Some("API.example.com")),
            "everything read is kept"
        );
        assert_eq!(read(hello(None)).await.0, Ok(Opening::Hello(None)));
        assert_eq!(read(b"SSH-2.0-x\r\n".to_vec()).await.0, Ok(Opening::NotTls));
        assert_eq!(read(Vec::new()).await.0, Ok(Opening::NotTls));
        // Cut short, at every length.
        let whole = hello(Some("api.example.com"));
        for cut in 1..whole.len() {
            assert!(read(whole[..cut].to_vec()).await.0.is_err(), "cut at {cut}");
        }
        // A ClientHello spread over two records: the first does not hold it whole.
        let mut split = whole.clone();
        let message_len = whole.len() - HEADER;
        split[3..5].copy_from_slice(&((message_len - 10) as u16).to_be_bytes());
        assert!(read(split).await.0.is_err());
        // A record longer than TLS allows.
        let mut long = vec![HANDSHAKE, 3, 1, 0x40, 0x01];
        long.resize(HEADER + MAX_RECORD + 1, 0);
        assert!(read(long).await.0.is_err());
        // Garbage after the record's type, at every byte.
        for at in HEADER..whole.len() {
            let mut bad = whole.clone();
            bad[at] ^= 0xff;
            // Some flips still parse (the random, the suites); none may panic.
            let _ = read(bad).await;
        }
    }
}
