//! What a CONNECT tunnel opens with: the name a TLS client asks for, read from its first record,
//! or a plain HTTP request, so that the egress proxy decides on the name a server would route by
//! as on the tunnel's target (docs/isolation-model.md, "The egress proxy reads what a tunnel
//! opens with").
//!
//! The proxy decides on the host a CONNECT names, and connects to it; what the child then sends
//! through the tunnel is its own. A server that serves many names at one address (a content
//! network, a shared front, a pages host) routes a TLS connection by the name in its ClientHello
//! (SNI), and a plain HTTP request by its `Host`, so a child could ask the allowed host's
//! address for a name the personality never allowed. The first record of a tunnel that starts
//! like TLS is therefore read whole before anything is forwarded, and its name must be allowed
//! too; one that hides its name (Encrypted Client Hello) is refused. A tunnel whose first line
//! is an HTTP request is served as HTTP, each request's name checked ([`crate::tunnel`]).

use tokio::io::{AsyncRead, AsyncReadExt};

/// A TLS record's header: type, version, length.
pub(crate) const HEADER: usize = 5;
/// The longest plaintext record TLS allows (2^14 bytes).
pub(crate) const MAX_RECORD: usize = 1 << 14;
/// A handshake record.
pub(crate) const HANDSHAKE: u8 = 22;
/// A ClientHello handshake message.
const CLIENT_HELLO: u8 = 1;
/// The `server_name` extension.
const SERVER_NAME: u16 = 0;
/// The extensions that carry a name encrypted to the server, the name in the clear being a
/// cover: TLS Encrypted Client Hello's `encrypted_client_hello` and the earlier drafts'
/// `encrypted_server_name`.
const HIDDEN_NAME: [u16; 2] = [0xfe0d, 0xffce];
/// How long the first line of a tunnel that opens like text may be before it is refused rather
/// than looked at: longer than the request lines servers take (8 KiB to 64 KiB).
const MAX_FIRST_LINE: usize = 64 * 1024;
/// How long a tunnel's first line may stay unfinished while it could still be a request line. A
/// client sends its request line in one write; a child that sends part of one and waits is
/// refused rather than relayed unread.
const LINE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// What a tunnel's first bytes are.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Opening {
    /// Not TLS: forwarded as it is, the tunnel's target being the only decision.
    NotTls,
    /// A whole ClientHello, with the name it asks for if it names one.
    Hello(Option<String>),
    /// A first line that reads as an HTTP request line: the tunnel is served as HTTP.
    Http,
    /// A request to start TLS before anything else ([`POSTGRES_SSL_REQUEST`], whole): a
    /// ClientHello follows once the server agrees.
    TlsRequest,
}

/// PostgreSQL's SSLRequest: a message of length 8 with the code 80877103. The server answers
/// `S` and the client starts TLS, whose ClientHello names the database a front routes by (Neon
/// picks its endpoint by it).
pub(crate) const POSTGRES_SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// Reads the first record of a tunnel from `client` onto `first` (which may hold its first
/// bytes already; everything read, to forward once decided, in one piece: a tunnel's first
/// bytes reach the server as they left the child)
/// and says what it is. A record that starts like TLS but is not a whole ClientHello in one
/// record (cut short, longer than TLS allows, or a ClientHello spread over records), or that
/// hides its name, is an error: its name cannot be known, so it is refused. A tunnel that opens
/// like text is read until its first line is whole (a child may send a byte at a time); one
/// whose first line is longer than [`MAX_FIRST_LINE`], or still unfinished after
/// [`LINE_WAIT`], is refused.
pub(crate) async fn opening<R: AsyncRead + Unpin>(
    client: &mut R,
    first: &mut Vec<u8>,
) -> Result<Opening, String> {
    if first.is_empty() && more(client, first).await? == 0 {
        return Ok(Opening::NotTls);
    }
    if POSTGRES_SSL_REQUEST.starts_with(&first[..first.len().min(POSTGRES_SSL_REQUEST.len())]) {
        return ssl_request(client, first).await;
    }
    if first[0] != HANDSHAKE {
        return text_opening(client, first).await;
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

/// What a tunnel opens with whose first bytes are those of [`POSTGRES_SSL_REQUEST`]: read until
/// they are the whole request ([`Opening::TlsRequest`]) or not; a request held back unfinished
/// for [`LINE_WAIT`] is refused, as a first line is.
async fn ssl_request<R: AsyncRead + Unpin>(
    client: &mut R,
    first: &mut Vec<u8>,
) -> Result<Opening, String> {
    let request = POSTGRES_SSL_REQUEST.len();
    let whole = async {
        while first.len() < request && POSTGRES_SSL_REQUEST.starts_with(first) {
            if more(client, first).await? == 0 {
                return Ok(false);
            }
        }
        Ok::<_, String>(first.starts_with(&POSTGRES_SSL_REQUEST))
    };
    match tokio::time::timeout(LINE_WAIT, whole).await {
        Ok(Ok(true)) => Ok(Opening::TlsRequest),
        Ok(Ok(false)) => Ok(Opening::NotTls),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(format!(
            "a request to start TLS not whole after {} s",
            LINE_WAIT.as_secs()
        )),
    }
}

/// What a tunnel that does not open with a TLS record opens with: [`Opening::Http`] when its
/// first line is an HTTP request line, read whole first. A first line still not whole after
/// [`LINE_WAIT`] is refused: it could still become a request.
async fn text_opening<R: AsyncRead + Unpin>(
    client: &mut R,
    first: &mut Vec<u8>,
) -> Result<Opening, String> {
    let wait = async {
        loop {
            match first_line(first) {
                Line::NotRequest => return Ok(Opening::NotTls),
                Line::Whole(line) => {
                    return Ok(if is_request_line(line) {
                        Opening::Http
                    } else {
                        Opening::NotTls
                    });
                }
                Line::Partial => {}
            }
            if first.len() > MAX_FIRST_LINE {
                return Err(format!(
                    "a first line longer than {} KiB",
                    MAX_FIRST_LINE / 1024
                ));
            }
            // Ended before a whole line: no request can be in it.
            if more(client, first).await? == 0 {
                return Ok(Opening::NotTls);
            }
        }
    };
    tokio::time::timeout(LINE_WAIT, wait)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "a first line that could be a request, not whole after {} s",
                LINE_WAIT.as_secs()
            ))
        })
}

/// The first line of what a tunnel carries so far.
#[derive(Debug, PartialEq, Eq)]
enum Line<'a> {
    /// It cannot be a request line: past the empty lines and blanks a lenient server skips, its
    /// first byte is not one a method may start with, or before its end it holds a control byte
    /// no server takes in a request line.
    NotRequest,
    /// Its first line, whole (without its line end: a CR, which a lenient server may take for
    /// one, or an LF).
    Whole(&'a [u8]),
    /// Not whole yet.
    Partial,
}

fn first_line(bytes: &[u8]) -> Line<'_> {
    let Some(start) = bytes
        .iter()
        .position(|b| !matches!(b, b'\r' | b'\n' | b' ' | b'\t'))
    else {
        return Line::Partial;
    };
    let rest = &bytes[start..];
    // A method is a token (RFC 9110): these are the bytes a token is made of.
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if !token(rest[0]) {
        return Line::NotRequest;
    }
    for (at, &b) in rest.iter().enumerate() {
        match b {
            b'\r' | b'\n' => return Line::Whole(&rest[..at]),
            b'\t' => {}
            _ if b < 0x20 || b == 0x7f => return Line::NotRequest,
            _ => {}
        }
    }
    Line::Partial
}

/// Whether `line` reads as an HTTP request line to some server: it names an HTTP version
/// anywhere, in any case (the HTTP/2 preface, `PRI * HTTP/2.0`, included). What is refused too
/// often here (a first line that only mentions one) is served as HTTP, which refuses what it
/// cannot parse; what a lenient server could take as a request is never forwarded unread.
fn is_request_line(line: &[u8]) -> bool {
    line.windows(5).any(|w| w.eq_ignore_ascii_case(b"HTTP/"))
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
        if HIDDEN_NAME.contains(&kind) {
            return Err(
                "a ClientHello that hides the name it asks for (Encrypted Client Hello)".to_owned(),
            );
        }
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
pub(crate) mod tests {
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
        // A ClientHello that hides the name it asks for: the name in the clear is a cover.
        for kind in HIDDEN_NAME {
            let mut hidden = whole.clone();
            // Its first extension (after the name) becomes the hiding one.
            let at = hidden
                .windows(4)
                .position(|w| w == [0x00, 0x2b, 0x00, 0x03])
                .unwrap();
            hidden[at..at + 2].copy_from_slice(&kind.to_be_bytes());
            let got = read(hidden).await.0;
            assert!(
                got.as_ref()
                    .is_err_and(|e| e.contains("Encrypted Client Hello")),
                "{kind:#x}: {got:?}"
            );
        }
        // Garbage after the record's type, at every byte.
        for at in HEADER..whole.len() {
            let mut bad = whole.clone();
            bad[at] ^= 0xff;
            // Some flips still parse (the random, the suites); none may panic.
            let _ = read(bad).await;
        }
    }

    #[tokio::test]
    async fn a_tunnel_that_opens_with_an_http_request_is_known_by_its_first_line() {
        let read = |bytes: Vec<u8>| async move {
            let mut first = Vec::new();
            let got = opening(&mut bytes.as_slice(), &mut first).await;
            (got, first)
        };
        for request in [
            &b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"[..],
            b"\r\n\r\nGET / HTTP/1.1\r\n",
            b" \tget /x http/1.0\n",
            b"PROPFIND / HTTP/1.1\r\n",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        ] {
            let (got, first) = read(request.to_vec()).await;
            assert_eq!(got, Ok(Opening::Http), "{request:?}");
            assert_eq!(first, request, "everything read is kept");
        }
        for other in [
            &b"SSH-2.0-OpenSSH_9.6\r\n"[..],
            b"*1\r\n$4\r\nPING\r\n",
            // PostgreSQL's request for GSSAPI encryption, and a startup message without TLS.
            b"\x00\x00\x00\x08\x04\xd2\x16\x30",
            b"\x00\x00\x00\x54\x00\x03\x00\x00user\x00",
            // A request to start TLS cut short.
            b"\x00\x00\x00\x08\x04",
            // Ended before its first line was whole: no request can be in it.
            b"GET / HTTP/1.1",
            b"",
        ] {
            assert_eq!(
                read(other.to_vec()).await.0,
                Ok(Opening::NotTls),
                "{other:?}"
            );
        }
        // PostgreSQL's SSLRequest, whole: TLS follows once the server agrees.
        assert_eq!(
            read(POSTGRES_SSL_REQUEST.to_vec()).await.0,
            Ok(Opening::TlsRequest)
        );
        // A first line not whole past the bound is refused, not forwarded unread (a whole one
        // is served as HTTP, whose own limits refuse it).
        let mut long = b"GET /".to_vec();
        long.resize(MAX_FIRST_LINE + 4096 * 2, b'a');
        let got = read(long).await.0;
        assert!(got.as_ref().is_err_and(|e| e.contains("64 KiB")), "{got:?}");
    }

    #[tokio::test]
    async fn a_first_line_sent_a_byte_at_a_time_is_read_whole() {
        let (mut child, mut proxy) = tokio::io::duplex(64);
        let sender = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for byte in b"GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n" {
                child.write_all(&[*byte]).await.unwrap();
                tokio::task::yield_now().await;
            }
            child
        });
        let mut first = Vec::new();
        assert_eq!(opening(&mut proxy, &mut first).await, Ok(Opening::Http));
        assert!(first.starts_with(b"GET / HTTP/1.1\r"), "{first:?}");
        drop(sender.await.unwrap());
    }

    #[tokio::test]
    async fn what_cannot_be_a_request_line_is_known_at_once() {
        // The child keeps its side open: an answer must not wait for more.
        for start in [
            &b"AMQP\x00\x00\x09\x01"[..],
            b"\x00\x05hello",
            b"HELO x\x7f",
        ] {
            let (mut child, mut proxy) = tokio::io::duplex(64);
            tokio::io::AsyncWriteExt::write_all(&mut child, start)
                .await
                .unwrap();
            let mut first = Vec::new();
            let got = tokio::time::timeout(
                std::time::Duration::from_secs(1),
                opening(&mut proxy, &mut first),
            )
            .await;
            assert_eq!(got, Ok(Ok(Opening::NotTls)), "{start:?}");
            drop(child);
        }
    }
}
