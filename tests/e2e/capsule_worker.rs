//! The capsule's worker driven by a host written by hand: the real worker binary (the capsule
//! lab), started the way `Capsule` starts one (its channel on descriptor 3, its settings as an
//! argument, an empty environment), and raw frames over the channel. What it answers, and what
//! it takes as the host breaking the protocol: it then ends with status 2 and answers nothing
//! (docs/isolation-model.md, "The warm path").

use std::io::{Read, Write};
use std::process::Child;
use std::time::Duration;

use bytes::Bytes;
use capability_capsule::ring::BlockingEnd;
use capability_capsule::wire::{
    CallContext, FromWorker, ToWorker, decode, encode, lift_strings, restore_strings,
};
use serde_json::{Value, json};

use crate::capsule::lab::raw_frame;

const LAB: &str = env!("CARGO_BIN_EXE_capsule-lab");
const MAX: usize = 1 << 20;
/// The worker's exit status when its host breaks the protocol.
const PROTOCOL: i32 = 2;

/// A worker of the lab's `tool`, and the host's end of its channel.
struct Worker {
    child: Child,
    channel: BlockingEnd,
}

impl Worker {
    /// Starts a worker and reads its `ready`.
    fn start(tool: &str) -> Self {
        let (mut host, worker) = BlockingEnd::for_worker().unwrap();
        let mut command = crate::capsule::lab::worker_command(LAB, tool, MAX, 0, worker);
        let child = command.spawn().unwrap();
        drop(command);
        host.set_timeout(Some(Duration::from_secs(20)));
        let mut worker = Worker {
            child,
            channel: host,
        };
        assert_eq!(worker.receive().map(|(m, _)| m), Some(FromWorker::Ready {}));
        worker
    }

    /// Sends `message` with `blobs` as one frame.
    fn send_with(&mut self, message: &ToWorker, blobs: &[Bytes]) {
        let frame = encode(message, blobs, MAX).unwrap();
        self.channel.write_all(&frame).unwrap();
    }

    /// Sends a call with its long strings lifted into the blob, as a sender that writes JSON
    /// may (the host sends them in place).
    fn call(&mut self, seq: u64, mut args: Value, context: Option<CallContext>) {
        let (lifted, blobs) = lift_strings(&mut args);
        let call = ToWorker::Call {
            seq,
            call_id: format!("c{seq}"),
            args,
            context,
            lifted,
        };
        self.send_with(&call, &blobs);
    }

    /// Writes `bytes` as they are.
    fn send_raw(&mut self, bytes: &[u8]) {
        self.channel.write_all(bytes).unwrap();
    }

    /// The worker's next message and blobs; `None` when it closed the channel.
    fn receive(&mut self) -> Option<(FromWorker, Vec<Bytes>)> {
        let mut prefix = [0u8; 4];
        match self.channel.read_exact(&mut prefix) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return None,
            Err(e) => panic!("read: {e}"),
        }
        let mut body = vec![0u8; u32::from_be_bytes(prefix) as usize];
        self.channel.read_exact(&mut body).unwrap();
        Some(decode(Bytes::from(body)).unwrap())
    }

    /// The answer to call `seq`, its lifted strings put back as the host puts them, and how
    /// many rode in the blob.
    fn answer(&mut self, seq: u64) -> (Value, usize) {
        match self.receive() {
            Some((
                FromWorker::Done {
                    seq: done,
                    result: Ok(mut value),
                    lifted,
                },
                blobs,
            )) if done == seq => {
                restore_strings(&mut value, &lifted, &blobs).unwrap();
                (value, lifted.len())
            }
            other => panic!("expected the answer to call {seq}, got {other:?}"),
        }
    }

    /// Asserts the worker answers nothing more and ends with the protocol status.
    fn ends_unanswered(mut self, what: &str) {
        assert!(
            self.receive().is_none(),
            "{what}: no answer, the channel closes"
        );
        let status = self.child.wait().unwrap();
        assert_eq!(status.code(), Some(PROTOCOL), "{what}: {status}");
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn context(session: &str, dir: &str, fs: bool) -> CallContext {
    CallContext {
        session_id: session.into(),
        personality_id: Some("p".into()),
        tool: "whoami".into(),
        working_dir: dir.into(),
        fetch: false,
        fs,
        secrets: None,
        process: false,
        kv: false,
        attachments: false,
    }
}

#[test]
fn a_call_without_a_context_runs_in_the_one_held_from_the_call_before() {
    let mut worker = Worker::start("whoami");
    worker.call(1, json!({}), Some(context("a", "/w/a", false)));
    let (first, _) = worker.answer(1);
    assert_eq!(
        (&first["session"], &first["dir"], &first["call_id"]),
        (&json!("a"), &json!("/w/a"), &json!("c1"))
    );
    worker.call(2, json!({}), None);
    let (second, _) = worker.answer(2);
    assert_eq!(
        (&second["session"], &second["dir"], &second["call_id"]),
        (&json!("a"), &json!("/w/a"), &json!("c2")),
        "the held context, with the call's own id"
    );
    worker.call(3, json!({}), Some(context("b", "/w/b", false)));
    let (third, _) = worker.answer(3);
    assert_eq!(
        (&third["session"], &third["dir"]),
        (&json!("b"), &json!("/w/b")),
        "a new context replaces the held one"
    );
    assert_eq!(first["pid"], third["pid"], "one worker throughout");
    // Closing the channel ends it cleanly.
    let Worker { child, channel } = &mut worker;
    channel.shutdown().unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

// guarantee: G-CAP-03
#[test]
fn long_strings_cross_whole_both_ways_lifted_or_not() {
    let mut worker = Worker::start("whoami");
    let long = "é".repeat(300) + "\u{1F600}\"\\\n";
    let args = json!({
        "short": "s",
        "long": long,
        "list": [long, 1, "t", {"deep": long}],
        "edge": "x".repeat(capability_capsule::wire::LIFTED_LEN),
    });
    // Lifted into the blob, as a sender that writes JSON may.
    worker.call(1, args.clone(), Some(context("a", "/w", false)));
    let (value, lifted) = worker.answer(1);
    assert_eq!(
        value["args"], args,
        "every string in its place, byte for byte"
    );
    assert_eq!(
        lifted, 0,
        "a compact result carries its strings where they are"
    );
    // Not lifted, as the host sends them.
    let unlifted = ToWorker::Call {
        seq: 2,
        call_id: "c2".into(),
        args: args.clone(),
        context: None,
        lifted: Vec::new(),
    };
    worker.send_with(&unlifted, &[]);
    assert_eq!(worker.answer(2).0["args"], args, "the same, byte for byte");
}

#[test]
fn a_tool_that_panics_fails_its_call_and_the_worker_serves_the_next() {
    // The worker polls the running call in its own loop: a panic must end the call, never the
    // loop.
    let mut worker = Worker::start("escape");
    let mut escape = context("a", "/w", true);
    escape.tool = "escape".into();
    for seq in 1..=3 {
        worker.call(
            seq,
            json!({"attempt": "panic"}),
            (seq == 1).then(|| escape.clone()),
        );
        match worker.receive() {
            Some((
                FromWorker::Done {
                    seq: done,
                    result: Err(error),
                    ..
                },
                _,
            )) if done == seq => assert!(
                error
                    .message
                    .contains("panicked in its capsule: the lab tool panics on purpose"),
                "call {seq}: {error:?}"
            ),
            other => panic!("call {seq}: expected its error, got {other:?}"),
        }
    }
    assert!(
        worker.child.try_wait().unwrap().is_none(),
        "the same worker answered all three and still runs"
    );
}

#[test]
fn a_first_call_without_a_context_ends_the_worker_unanswered() {
    let mut worker = Worker::start("whoami");
    worker.call(1, json!({}), None);
    worker.ends_unanswered("a call without a context, none held");
}

#[test]
fn a_call_while_one_is_running_ends_the_worker() {
    // The proxy's read waits for the host's reply, which never comes.
    let mut worker = Worker::start("proxy");
    worker.call(
        1,
        json!({"op": "read", "path": "/w/a.txt"}),
        Some(context("a", "/w", true)),
    );
    assert!(
        matches!(
            worker.receive(),
            Some((FromWorker::Request { seq: 1, .. }, _))
        ),
        "the running call asks the host"
    );
    worker.call(2, json!({}), None);
    worker.ends_unanswered("a second call while the first runs");
}

/// A whole context, so that only what a case breaks ends the worker.
const CONTEXT: &str = r#"{"session_id":"s","personality_id":null,"tool":"whoami","working_dir":"/w","fetch":false,"fs":false,"secrets":null,"process":false,"kv":false,"attachments":false}"#;

#[test]
fn frames_that_are_not_a_call_or_a_reply_end_the_worker() {
    // A compact call of `args` (already encoded) with the context above, then `trailer`.
    let compact_call = |tag: u8, args: &[u8], trailer: &[u8]| {
        let mut header = vec![tag];
        header.extend_from_slice(&1u64.to_be_bytes());
        header.extend_from_slice(&1u32.to_be_bytes());
        header.push(b'c');
        header.extend_from_slice(args);
        header.push(1);
        header.extend_from_slice(&u32::try_from(CONTEXT.len()).unwrap().to_be_bytes());
        header.extend_from_slice(CONTEXT.as_bytes());
        header.extend_from_slice(&0u32.to_be_bytes());
        header.extend_from_slice(trailer);
        raw_frame(header, &[])
    };
    let twice = [
        &[8, 0, 0, 0, 2][..],
        &[0, 0, 0, 1, b'k', 2],
        &[0, 0, 0, 1, b'k', 1],
    ]
    .concat();
    let hostile: [(&str, Vec<u8>); 10] = [
        (
            "a compact call with a key twice in one object",
            compact_call(1, &twice, b""),
        ),
        (
            "a compact result sent to a worker",
            compact_call(2, &[8, 0, 0, 0, 0], b""),
        ),
        (
            "bytes after a compact call",
            compact_call(1, &[8, 0, 0, 0, 0], b"\0"),
        ),
        (
            "the internally tagged form of earlier builds",
            raw_frame(
                r#"{"type":"call","seq":1,"call_id":"c","args":{},"context":null}"#,
                &[],
            ),
        ),
        (
            "a message the worker sends, not one it takes",
            raw_frame(r#"{"ready":{}}"#, &[]),
        ),
        (
            "an unknown field",
            raw_frame(
                r#"{"call":{"seq":1,"call_id":"c","args":{},"context":null,"extra":1}}"#,
                &[],
            ),
        ),
        ("not JSON", raw_frame("not json", &[])),
        (
            "lifted strings longer than the blob",
            raw_frame(
                format!(
                    r#"{{"call":{{"seq":1,"call_id":"c","args":{{"a":""}},"context":{CONTEXT},"lifted":[[0,9]]}}}}"#
                ),
                &[b"abc"],
            ),
        ),
        (
            "a blob without lifted strings",
            raw_frame(
                format!(
                    r#"{{"call":{{"seq":1,"call_id":"c","args":{{"a":""}},"context":{CONTEXT}}}}}"#
                ),
                &[b"abc"],
            ),
        ),
        (
            "lengths that do not add up",
            vec![0, 0, 0, 6, 0, 0, 0, 9, 0, b'{'],
        ),
    ];
    for (what, frame) in hostile {
        let mut worker = Worker::start("whoami");
        worker.send_raw(&frame);
        worker.ends_unanswered(what);
    }
    // The compact call that keeps the rules is run.
    let mut worker = Worker::start("whoami");
    worker.send_raw(&compact_call(1, &[8, 0, 0, 0, 0], b""));
    let answer = worker.receive();
    assert!(
        matches!(
            &answer,
            Some((
                FromWorker::Done {
                    seq: 1,
                    result: Ok(_),
                    ..
                },
                _
            ))
        ),
        "{answer:?}"
    );
}
