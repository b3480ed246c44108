//! Escalation over MCP: the registry's approval handler asks the client that made the call
//! (docs/mcp.md, "Approval").
//!
//! A call registers how it can be asked before it runs ([`Route`]), under its call id; the
//! registry's [`ApprovalHandler::approve`] finds the route by the id in the request. A call
//! without a route, a client without elicitation, a timeout or any answer but an explicit
//! approval refuses the call.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use capability_core::{ApprovalHandler, ApprovalRequest, EscalationSubject, shown, shown_at_most};
use capability_types::async_trait;
use rmcp::model::{
    BooleanSchema, ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema,
    InputRequest, PrimitiveSchemaDefinition,
};
use rmcp::{Peer, RoleServer};
use serde_json::Value;

/// How long a user has to answer an elicitation, and how long an `input_required` state lives.
pub(crate) const ANSWER_WITHIN: Duration = Duration::from_secs(600);
/// At most this many `input_required` states wait for their retry; the oldest goes first.
const MAX_PENDING: usize = 1024;
/// The key of toolcap's elicitation in `inputRequests` / `inputResponses`.
pub(crate) const INPUT_KEY: &str = "toolcap_approval";

/// How the approval of one running call is obtained.
pub(crate) enum Route {
    /// Ask the client with an `elicitation/create` request (protocol before 2026-07-28).
    Elicit(Peer<RoleServer>),
    /// The client already answered, through an `input_required` round trip.
    Answered(bool),
    /// It cannot be asked; refuse with this reason.
    Refuse(&'static str),
}

/// An `input_required` answer waiting for its retry.
struct Pending {
    tool: String,
    args: Value,
    issued: Instant,
}

/// The approval state of one server: routes of running calls, pending round trips.
#[derive(Default)]
pub(crate) struct Approvals {
    routes: Mutex<HashMap<String, Route>>,
    pending: Mutex<(HashMap<String, Pending>, VecDeque<String>)>,
    nonce: NonceSource,
}

impl Approvals {
    /// Registers how `call_id` is asked, until the returned guard is dropped.
    pub(crate) fn route(&self, call_id: &str, route: Route) -> RouteGuard<'_> {
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(call_id.to_owned(), route);
        RouteGuard {
            approvals: self,
            call_id: call_id.to_owned(),
        }
    }

    /// Issues an `input_required` state for a call of `tool` with `args` that needs approval.
    pub(crate) fn issue(&self, tool: &str, args: &Value) -> String {
        let state = self.nonce.next();
        let mut guard = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let (map, order) = &mut *guard;
        while map.len() >= MAX_PENDING {
            match order.pop_front() {
                Some(oldest) => {
                    map.remove(&oldest);
                }
                None => break,
            }
        }
        map.insert(
            state.clone(),
            Pending {
                tool: tool.to_owned(),
                args: args.clone(),
                issued: Instant::now(),
            },
        );
        order.push_back(state.clone());
        state
    }

    /// Redeems an echoed state: the client's answer, when the state was issued here for this
    /// very tool and these arguments, has not expired and was not used before.
    pub(crate) fn redeem(
        &self,
        state: &str,
        tool: &str,
        args: &Value,
        responses: Option<&HashMapLike>,
    ) -> Result<bool, &'static str> {
        let pending = {
            let mut guard = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            let (map, order) = &mut *guard;
            let pending = map.remove(state);
            if pending.is_some() {
                order.retain(|s| s != state);
            }
            pending
        };
        let Some(pending) = pending else {
            return Err("unknown, used or expired requestState");
        };
        if pending.issued.elapsed() > ANSWER_WITHIN {
            return Err("expired requestState");
        }
        if pending.tool != tool || &pending.args != args {
            return Err("requestState was issued for another call");
        }
        Ok(responses
            .and_then(|r| r.get(INPUT_KEY))
            .is_some_and(approved))
    }
}

/// The `inputResponses` map of a retried call.
pub(crate) type HashMapLike = std::collections::BTreeMap<String, Value>;

/// Whether an elicitation result (as JSON) approves: `action` is `accept` and the form's
/// `approve` field is `true`. Anything else, including a malformed result, refuses.
fn approved(result: &Value) -> bool {
    result.get("action").and_then(Value::as_str) == Some("accept")
        && result
            .get("content")
            .and_then(|c| c.get("approve"))
            .and_then(Value::as_bool)
            == Some(true)
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals").finish_non_exhaustive()
    }
}

/// Removes a call's route when the call ends.
pub(crate) struct RouteGuard<'a> {
    approvals: &'a Approvals,
    call_id: String,
}

impl Drop for RouteGuard<'_> {
    fn drop(&mut self) {
        self.approvals
            .routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.call_id);
    }
}

/// The elicitation toolcap sends: the call described, one boolean to approve it.
pub(crate) fn elicitation(message: String) -> ElicitRequestParams {
    let approve = BooleanSchema::new()
        .title("Allow this call")
        .description("Run the tool call described above once")
        .with_default(false);
    let mut properties = BTreeMap::new();
    properties.insert(
        "approve".to_owned(),
        PrimitiveSchemaDefinition::Boolean(approve),
    );
    let mut schema = ElicitationSchema::new(properties);
    schema.required = Some(vec!["approve".to_owned()]);
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    }
}

/// The same elicitation as an `inputRequests` entry.
pub(crate) fn input_request(message: String) -> InputRequest {
    InputRequest::Elicitation(ElicitRequest::new(elicitation(message)))
}

/// What the user is shown: the tool, what needs approval, the arguments with credentials
/// masked.
pub(crate) fn describe(tool: &str, subjects: &[EscalationSubject], masked_args: &Value) -> String {
    // What came from the call is shown escaped: an agent's path must not start a line of its
    // own in the client's dialog or reverse how the text reads (docs/policy.md, "Escalation").
    // The arguments are cut short and come before the subjects (what is approved), so that a
    // flood of them cannot push the subjects out of the dialog.
    let mut text = format!(
        "toolcap: the tool {} asks for approval. Arguments: {}. It needs: ",
        shown(tool),
        shown_at_most(&masked_args.to_string(), SHOWN_ARGUMENTS)
    );
    for (i, s) in subjects.iter().enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        text.push_str(&format!("{} {}", s.category, shown(&s.subject)));
    }
    text
}

/// About how much of a call's arguments an approval request shows.
const SHOWN_ARGUMENTS: usize = 2048;

#[async_trait]
impl ApprovalHandler for Approvals {
    async fn approve(&self, request: &ApprovalRequest) -> Result<bool, String> {
        let peer = {
            let routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
            match routes.get(&request.call_id) {
                None => return Err("no MCP request is waiting for this approval".to_owned()),
                Some(Route::Answered(answer)) => return Ok(*answer),
                Some(Route::Refuse(reason)) => return Err((*reason).to_owned()),
                Some(Route::Elicit(peer)) => peer.clone(),
            }
        };
        let message = describe(&request.tool, &request.subjects, &request.arguments);
        let answer = peer
            .create_elicitation_with_timeout(elicitation(message), Some(ANSWER_WITHIN))
            .await
            .map_err(|e| format!("the MCP client did not answer the approval request: {e}"))?;
        Ok(answer.action == ElicitationAction::Accept
            && answer
                .content
                .as_ref()
                .and_then(|c| c.get("approve"))
                .and_then(Value::as_bool)
                == Some(true))
    }
}

/// Unpredictable `requestState` handles: 128 bits from two OS-seeded hash keys over a counter.
struct NonceSource {
    keys: [RandomState; 2],
    counter: AtomicU64,
}

impl Default for NonceSource {
    fn default() -> Self {
        Self {
            keys: [RandomState::new(), RandomState::new()],
            counter: AtomicU64::new(0),
        }
    }
}

impl NonceSource {
    fn next(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let word = |key: &RandomState| {
            let mut h = key.build_hasher();
            h.write_u64(n);
            h.finish()
        };
        format!("{:016x}{:016x}", word(&self.keys[0]), word(&self.keys[1]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn responses(v: Value) -> HashMapLike {
        let mut m = HashMapLike::new();
        m.insert(INPUT_KEY.to_owned(), v);
        m
    }

    /// An agent's path cannot draw a subject of its own in the client's approval dialog: its
    /// newline, terminal escape and bidirectional override are shown escaped.
    // guarantee: G-MCP-02
    #[test]
    fn an_approval_message_shows_control_characters_escaped() {
        let subject = EscalationSubject {
            category: "fs_reach.write".to_owned(),
            subject: "/w/a\u{1b}[2J.txt\nfs_reach.write /w/safe\u{202e}txt.exe".to_owned(),
        };
        let message = describe("write_file", &[subject], &json!({"path": "a\u{202e}b"}));
        assert!(
            !message.contains(['\n', '\u{1b}', '\u{202e}']),
            "{message:?}"
        );
        assert_eq!(
            message,
            "toolcap: the tool write_file asks for approval. Arguments: \
             {\"path\":\"a\\u{202e}b\"}. It needs: fs_reach.write \
             /w/a\\u{1b}[2J.txt\\nfs_reach.write /w/safe\\u{202e}txt.exe"
        );
    }

    // guarantee: G-MCP-02
    #[test]
    fn a_state_is_redeemed_once_for_its_own_call_only() {
        let approvals = Approvals::default();
        let args = json!({"path": "a"});
        let yes = responses(json!({"action": "accept", "content": {"approve": true}}));
        let state = approvals.issue("read_file", &args);
        assert_eq!(
            approvals.redeem(&state, "read_file", &args, Some(&yes)),
            Ok(true)
        );
        assert!(
            approvals
                .redeem(&state, "read_file", &args, Some(&yes))
                .is_err()
        );
        let state = approvals.issue("read_file", &args);
        assert!(
            approvals
                .redeem(&state, "read_file", &json!({"path": "b"}), Some(&yes))
                .is_err()
        );
        let state = approvals.issue("read_file", &args);
        assert!(
            approvals
                .redeem(&state, "write_file", &args, Some(&yes))
                .is_err()
        );
        assert!(
            approvals
                .redeem("made-up", "read_file", &args, Some(&yes))
                .is_err()
        );
    }

    #[test]
    fn only_an_explicit_accept_with_approve_true_approves() {
        let approvals = Approvals::default();
        let args = json!({});
        for (answer, expected) in [
            (
                json!({"action": "accept", "content": {"approve": true}}),
                true,
            ),
            (
                json!({"action": "accept", "content": {"approve": false}}),
                false,
            ),
            (json!({"action": "accept", "content": {}}), false),
            (json!({"action": "accept"}), false),
            (
                json!({"action": "decline", "content": {"approve": true}}),
                false,
            ),
            (json!({"action": "cancel"}), false),
            (json!("accept"), false),
        ] {
            let state = approvals.issue("t", &args);
            assert_eq!(
                approvals.redeem(&state, "t", &args, Some(&responses(answer.clone()))),
                Ok(expected),
                "{answer}"
            );
        }
        let state = approvals.issue("t", &args);
        assert_eq!(approvals.redeem(&state, "t", &args, None), Ok(false));
    }

    #[test]
    fn pending_states_are_bounded_and_unpredictable() {
        let approvals = Approvals::default();
        let first = approvals.issue("t", &json!({}));
        for _ in 0..MAX_PENDING {
            approvals.issue("t", &json!({}));
        }
        assert!(approvals.redeem(&first, "t", &json!({}), None).is_err());
        let guard = approvals.pending.lock().unwrap();
        assert_eq!(guard.0.len(), MAX_PENDING);
        assert_eq!(guard.1.len(), MAX_PENDING);
        drop(guard);
        let a = approvals.nonce.next();
        let b = approvals.nonce.next();
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
    }
}
