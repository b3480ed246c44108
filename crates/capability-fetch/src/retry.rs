//! A TLS tunnel after its first ClientHello: a TLS 1.3 server may answer that with a
//! HelloRetryRequest and read a second ClientHello, and a server may take the name the second
//! asks for instead of the first's (OpenSSL's does). So nothing more of the child's goes through
//! until the server's first handshake message shows what it is, and when it asks again, the
//! child's next ClientHello is read whole and its name decided on as the first's was
//! (docs/isolation-model.md, "The egress proxy reads what a tunnel opens with").

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::sni::{HANDSHAKE, HEADER, MAX_RECORD, Opening, POSTGRES_SSL_REQUEST, server_name};
use crate::tunnel::Prefixed;

/// The `random` a ServerHello carries when it is a HelloRetryRequest (RFC 8446, 4.1.3).
const RETRY_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];
/// A ServerHello handshake message.
const SERVER_HELLO: u8 = 2;
/// A change_cipher_spec record, which a TLS 1.3 client in middlebox compatibility mode sends
/// before its second ClientHello.
const CHANGE_CIPHER_SPEC: u8 = 20;
/// How much of the server's answer is read for its first handshake message's type and random
/// before the tunnel is given up: a ServerHello's first 38 bytes come in its first record
/// from every server this has met; this leaves room for any split into records.
const MAX_ANSWER: usize = 64 * 1024;

/// Why a tunnel was ended: the name it asked for, if any, and the reason.
pub(crate) struct Refusal {
    pub(crate) name: Option<String>,
    pub(crate) why: String,
}

/// A tunnel that opened with a request to start TLS ([`Opening::TlsRequest`], read onto `sent`):
/// the request goes on alone and the server's one-byte answer comes back. When the server
/// agrees (`S`), what the child sends next must be a ClientHello, decided on as a tunnel's
/// first one is ([`hello`]); otherwise the tunnel is relayed as bytes.
pub(crate) async fn after_tls_request<C, U>(
    mut client: C,
    mut upstream: U,
    mut sent: Vec<u8>,
    allowed: impl Fn(&str) -> Result<(), String>,
) -> Option<Refusal>
where
    C: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
{
    let mut next = sent.split_off(POSTGRES_SSL_REQUEST.len());
    upstream.write_all(&sent).await.ok()?;
    let mut answer = [0u8; 1];
    upstream.read_exact(&mut answer).await.ok()?;
    client.write_all(&answer).await.ok()?;
    if answer != *b"S" {
        let mut client = Prefixed::new(next, client);
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        return None;
    }
    match crate::sni::opening(&mut client, &mut next).await {
        Ok(Opening::Hello(name)) => hello(client, upstream, next, name, allowed).await,
        Ok(_) => Some(Refusal {
            name: None,
            why: "after the server agreed to start TLS, what is not a ClientHello".to_owned(),
        }),
        Err(why) => Some(Refusal { name: None, why }),
    }
}

/// A tunnel whose first ClientHello, read onto `sent`, asks for `name`: refused when
/// `allowed` refuses the name, relayed otherwise ([`relay`]).
pub(crate) async fn hello<C, U>(
    client: C,
    upstream: U,
    sent: Vec<u8>,
    name: Option<String>,
    allowed: impl Fn(&str) -> Result<(), String>,
) -> Option<Refusal>
where
    C: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
{
    if let Some(why) = name.as_deref().and_then(|name| allowed(name).err()) {
        return Some(Refusal { name, why });
    }
    relay(client, upstream, sent, allowed).await
}

/// Relays a TLS tunnel whose first ClientHello has been decided on. `sent` is what the child
/// sent so far, its first record that ClientHello: that record goes to the server, and
/// nothing more of the child's until the server's answer shows what it is. While the server
/// asks again (a HelloRetryRequest; TLS allows one), the child's next ClientHello must be
/// whole in one record, past at most one change_cipher_spec record, and its name (if any)
/// must pass `allowed`; then the tunnel is relayed as bytes until either side ends. A tunnel
/// ended for what it asked is a [`Refusal`]; one that ended on its own (a side closing, a
/// read or write failing) is `None`.
async fn relay<C, U>(
    mut client: C,
    mut upstream: U,
    mut sent: Vec<u8>,
    allowed: impl Fn(&str) -> Result<(), String>,
) -> Option<Refusal>
where
    C: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
{
    let mut held = sent.split_off(record_end(&sent).min(sent.len()));
    upstream.write_all(&sent).await.ok()?;
    let mut retried = false;
    loop {
        let mut answer = Vec::new();
        let again = match asks_again(&mut upstream, &mut answer).await {
            Ok(again) => again,
            Err(Ended::Closed) => return None,
            Err(Ended::Refused(why)) => return Some(Refusal { name: None, why }),
        };
        client.write_all(&answer).await.ok()?;
        if !again {
            break;
        }
        if retried {
            let why = "a server that asked for a ClientHello a third time".to_owned();
            return Some(Refusal { name: None, why });
        }
        retried = true;
        let (name, end) = match second_hello(&mut client, &mut held).await {
            Ok(hello) => hello,
            Err(Ended::Closed) => return None,
            Err(Ended::Refused(why)) => return Some(Refusal { name: None, why }),
        };
        if let Some(why) = name.as_deref().and_then(|name| allowed(name).err()) {
            return Some(Refusal { name, why });
        }
        let rest = held.split_off(end);
        upstream.write_all(&held).await.ok()?;
        held = rest;
    }
    let mut client = Prefixed::new(held, client);
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    None
}

/// How reading what a side sent ended, when it did not give what was read for.
enum Ended {
    /// The side closed, or a read failed: the tunnel just ends.
    Closed,
    /// What was read is refused, for this reason.
    Refused(String),
}

/// Where the TLS record at the start of `bytes` ends (its header read; the record may not all
/// be there yet).
fn record_end(bytes: &[u8]) -> usize {
    match bytes.get(3..HEADER) {
        Some(&[high, low]) => HEADER + usize::from(u16::from_be_bytes([high, low])),
        _ => HEADER,
    }
}

/// Reads from `from` onto `into` until it holds at least `len` bytes; [`Ended::Closed`] when
/// `from` ends first or a read fails.
async fn fill<R: AsyncRead + Unpin>(
    from: &mut R,
    into: &mut Vec<u8>,
    len: usize,
) -> Result<(), Ended> {
    while into.len() < len {
        into.reserve(4096);
        match from.read_buf(into).await {
            Ok(0) | Err(_) => return Err(Ended::Closed),
            Ok(_) => {}
        }
    }
    Ok(())
}

/// Reads the server's answer to a ClientHello onto `answer` until its first handshake message
/// shows what it is (past a change_cipher_spec record): `true` for a HelloRetryRequest.
/// Anything else (a ServerHello, an alert, a record of another kind) is `false`: what the
/// server reads next from the child is encrypted, or nothing.
async fn asks_again<U: AsyncRead + Unpin>(
    upstream: &mut U,
    answer: &mut Vec<u8>,
) -> Result<bool, Ended> {
    let mut message = Vec::new();
    let mut at = 0;
    loop {
        if at > MAX_ANSWER {
            return Err(Ended::Refused(format!(
                "a server whose first handshake message was not under way within {} KiB",
                MAX_ANSWER / 1024
            )));
        }
        fill(upstream, answer, at + HEADER).await?;
        let end = record_end(&answer[at..]);
        // A server in compatibility mode sends a change_cipher_spec after a retry: past it,
        // as past the record boundaries of a message, the next message is what counts.
        if answer[at] == CHANGE_CIPHER_SPEC && message.is_empty() && end <= HEADER + 1 {
            fill(upstream, answer, at + end).await?;
            at += end;
            continue;
        }
        if answer[at] != HANDSHAKE {
            return Ok(false);
        }
        if end > HEADER + MAX_RECORD {
            return Ok(false);
        }
        fill(upstream, answer, at + end).await?;
        message.extend_from_slice(&answer[at + HEADER..at + end]);
        at += end;
        // A ServerHello: type, length (3), version (2), random (32).
        if let Some(random) = message.get(6..38) {
            return Ok(message[0] == SERVER_HELLO && random == RETRY_RANDOM);
        }
    }
}

/// Reads the child's ClientHello after a HelloRetryRequest onto `held` (which may hold its
/// first bytes already): at most one change_cipher_spec record, then a handshake record that
/// is one whole ClientHello. Returns the name it asks for, if any, and where its record ends
/// in `held`.
async fn second_hello<C: AsyncRead + Unpin>(
    client: &mut C,
    held: &mut Vec<u8>,
) -> Result<(Option<String>, usize), Ended> {
    let mut at = 0;
    fill(client, held, HEADER).await?;
    if held[0] == CHANGE_CIPHER_SPEC {
        // TLS 1.3's is one byte; one that carries more is not a client's, and what it carried
        // would reach the server unread.
        at = record_end(held);
        if at != HEADER + 1 {
            return Err(Ended::Refused(
                "a change_cipher_spec record that is not one byte".to_owned(),
            ));
        }
        fill(client, held, at + HEADER).await?;
    }
    if held[at] != HANDSHAKE {
        return Err(Ended::Refused(
            "after a HelloRetryRequest, a record that is not a ClientHello".to_owned(),
        ));
    }
    let end = at + record_end(&held[at..]);
    if end - at > HEADER + MAX_RECORD {
        return Err(Ended::Refused(format!(
            "a TLS record of {} bytes, more than TLS allows",
            end - at - HEADER
        )));
    }
    fill(client, held, end).await?;
    let name = server_name(&held[at + HEADER..end]).map_err(Ended::Refused)?;
    Ok((name, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handshake record holding `message`.
    fn record(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![kind, 0x03, 0x03];
        out.extend_from_slice(&(body.len() as u16).to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    /// The first 38 bytes of a ServerHello with `random`, and some more.
    fn server_hello(random: [u8; 32]) -> Vec<u8> {
        let mut out = vec![SERVER_HELLO, 0, 0, 70, 0x03, 0x03];
        out.extend_from_slice(&random);
        out.extend_from_slice(&[0u8; 36]);
        out
    }

    async fn answered(bytes: Vec<u8>) -> Result<bool, String> {
        let mut answer = Vec::new();
        match asks_again(&mut bytes.as_slice(), &mut answer).await {
            Ok(again) => {
                assert_eq!(answer, bytes, "everything read is handed on");
                Ok(again)
            }
            Err(Ended::Closed) => Err("closed".to_owned()),
            Err(Ended::Refused(why)) => Err(why),
        }
    }

    #[tokio::test]
    async fn a_retry_is_told_from_a_server_hello_however_its_records_are_cut() {
        let retry = server_hello(RETRY_RANDOM);
        assert_eq!(answered(record(HANDSHAKE, &retry)).await, Ok(true));
        assert_eq!(
            answered(record(HANDSHAKE, &server_hello([7; 32]))).await,
            Ok(false)
        );
        // The message over three records, one of them empty.
        let split = [
            record(HANDSHAKE, &retry[..10]),
            record(HANDSHAKE, &[]),
            record(HANDSHAKE, &retry[10..]),
        ]
        .concat();
        assert_eq!(answered(split).await, Ok(true));
        // A change_cipher_spec before it, as a server in compatibility mode sends one after
        // a retry: the message after it counts.
        let after = [record(CHANGE_CIPHER_SPEC, &[1]), record(HANDSHAKE, &retry)].concat();
        assert_eq!(answered(after).await, Ok(true));
        // An alert, or what is not TLS: nothing to ask again.
        assert_eq!(answered(record(21, &[2, 40])).await, Ok(false));
        assert_eq!(answered(b"SSH-2.0-x\r\n".to_vec()).await, Ok(false));
        // Cut short: the server closed.
        assert_eq!(
            answered(record(HANDSHAKE, &retry)[..20].to_vec()).await,
            Err("closed".to_owned())
        );
        // Empty records without end: given up, not read forever.
        let empty = record(HANDSHAKE, &[]).repeat(MAX_ANSWER / HEADER + 2);
        assert!(answered(empty).await.unwrap_err().contains("64 KiB"));
    }

    async fn second(bytes: Vec<u8>) -> Result<(Option<String>, usize), String> {
        let mut held = Vec::new();
        second_hello(&mut bytes.as_slice(), &mut held)
            .await
            .map_err(|e| match e {
                Ended::Closed => "closed".to_owned(),
                Ended::Refused(why) => why,
            })
    }

    #[tokio::test]
    async fn the_second_hello_is_read_whole_past_one_change_cipher_spec() {
        let hello = crate::sni::tests::hello(Some("api.example.com"));
        let named = Some("api.example.com".to_owned());
        assert_eq!(
            second(hello.clone()).await,
            Ok((named.clone(), hello.len()))
        );
        let ccs = record(CHANGE_CIPHER_SPEC, &[1]);
        let after = [ccs.clone(), hello.clone(), b"more".to_vec()].concat();
        assert_eq!(second(after).await, Ok((named, ccs.len() + hello.len())));
        // Two change_cipher_spec records, application data, a hello cut short or hiding its
        // name: refused or ended, never relayed.
        for (bytes, expected) in [
            (
                [ccs.clone(), ccs.clone(), hello.clone()].concat(),
                "not a ClientHello",
            ),
            (record(23, &[0; 40]), "not a ClientHello"),
            (
                [record(CHANGE_CIPHER_SPEC, &hello), hello.clone()].concat(),
                "not one byte",
            ),
            (hello[..hello.len() - 1].to_vec(), "closed"),
            (record(HANDSHAKE, &[1, 0, 0, 5, 0]), "fill its one record"),
        ] {
            let got = second(bytes).await.unwrap_err();
            assert!(got.contains(expected), "{got} / {expected}");
        }
    }

    /// A child (its end of a duplex pipe) and a server (likewise) around
    /// [`after_tls_request`]; the server answers the request with `answer`, then the child
    /// sends `then`. Returns the refusal's reason, if any, and what the server got after the
    /// request.
    async fn after_request(answer: &[u8], then: &[u8]) -> (Option<String>, Vec<u8>) {
        use tokio::io::duplex;
        let (mut child, proxy_child) = duplex(1 << 16);
        let (proxy_server, mut server) = duplex(1 << 16);
        // The request, as the proxy read it off the child.
        let sent = POSTGRES_SSL_REQUEST.to_vec();
        let proxy = tokio::spawn(after_tls_request(proxy_child, proxy_server, sent, |_| {
            Err("no name is allowed".to_owned())
        }));
        let mut request = [0u8; 8];
        server.read_exact(&mut request).await.unwrap();
        assert_eq!(request, POSTGRES_SSL_REQUEST);
        server.write_all(answer).await.unwrap();
        let mut got = [0u8; 1];
        child.read_exact(&mut got).await.unwrap();
        assert_eq!(got, answer[..1]);
        child.write_all(then).await.unwrap();
        drop(child);
        // The child's end closed: the proxy closes the server's too, whatever it decided.
        let mut rest = Vec::new();
        server.read_to_end(&mut rest).await.unwrap();
        drop(server);
        (proxy.await.unwrap().map(|r| r.why), rest)
    }

    #[tokio::test]
    async fn after_a_request_to_start_tls_only_a_client_hello_goes_on() {
        // Refused TLS (`N`): the connection goes on in the clear, relayed as bytes.
        let (refused, got) = after_request(b"N", b"startup").await;
        assert_eq!((refused, got), (None, b"startup".to_vec()));
        // Agreed (`S`): a ClientHello whose name is refused, or anything that is not a
        // ClientHello, ends the tunnel before the server gets a byte of it.
        let hello = crate::sni::tests::hello(Some("evil.example"));
        for then in [&hello[..], b"GET / HTTP/1.1\r\n\r\n", b"startup"] {
            let (refused, got) = after_request(b"S", then).await;
            assert!(refused.is_some(), "{then:?}");
            assert!(got.is_empty(), "{then:?}: {got:?}");
        }
    }
}
