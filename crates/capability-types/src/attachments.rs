//! The sixth category: attachments, the files, images and other blobs a user attaches to a turn
//! (docs/semantics.md, "Attachments"). A tool declares which kinds it may receive; the
//! personality bounds them; a call sees, through [`ScopedAttachments`], only the attachments
//! given to that call whose kind both allow, as opaque ids, never host paths.

use std::fmt;

use async_trait::async_trait;
use bytes::Bytes;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use crate::error::CapabilityError;

/// The most bytes one [`ScopedAttachments::read`] returns (4 MiB): larger attachments are read
/// in ranges.
pub const MAX_ATTACHMENT_READ: usize = 4 * 1024 * 1024;

/// `attachments`: the kinds of attachment a tool may receive.
///
/// The JSON form is Ethos's, `{"kinds": ["image", "file"]}` or `{"kinds": "*"}`, and the short
/// form `"*"`; each round-trips as written. A kind is a MIME type (`application/pdf`), a type
/// with any subtype (`image/*`), a class (`image`, `audio`, `video`, `text`: the same as
/// `image/*` …; `file`: anything that is not an image, audio or video), or `*`.
///
/// ```
/// use capability_types::{AttachmentsCapability, ToolCapabilities};
/// let caps: ToolCapabilities = serde_json::from_str(r#"{"attachments":{"kinds":["image/*","application/pdf"]}}"#).unwrap();
/// let a = caps.attachments.as_ref().unwrap();
/// assert!(a.allows("image/png") && a.allows("application/pdf") && !a.allows("text/plain"));
/// assert_eq!(serde_json::to_string(&caps).unwrap(), r#"{"attachments":{"kinds":["image/*","application/pdf"]}}"#);
/// let any: ToolCapabilities = serde_json::from_str(r#"{"attachments":"*"}"#).unwrap();
/// assert_eq!(serde_json::to_string(&any).unwrap(), r#"{"attachments":"*"}"#);
/// assert!(serde_json::from_str::<ToolCapabilities>(r#"{"attachments":{"kinds":["image/"]}}"#).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AttachmentsCapability {
    /// The kind patterns; `None` for `*`.
    pub kinds: Option<Vec<String>>,
    /// Whether it was written as the short form `"*"` (kept for the round trip).
    short: bool,
}

impl AttachmentsCapability {
    /// Every kind (`"*"`).
    pub fn any() -> Self {
        Self {
            kinds: None,
            short: true,
        }
    }

    /// The listed kind patterns. Fails on a pattern that is not a kind (see the type's docs).
    pub fn kinds<I, S>(kinds: I) -> Result<Self, String>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let kinds: Vec<String> = kinds.into_iter().map(Into::into).collect();
        for k in &kinds {
            check_kind_pattern(k)?;
        }
        Ok(Self {
            kinds: Some(kinds),
            short: false,
        })
    }

    /// Whether an attachment of MIME type `kind` may be received.
    pub fn allows(&self, kind: &str) -> bool {
        match &self.kinds {
            None => true,
            Some(patterns) => patterns.iter().any(|p| kind_matches(p, kind)),
        }
    }
}

/// Whether the MIME type `kind` matches `pattern` (see [`AttachmentsCapability`]). Compared
/// without regard to ASCII case; parameters (`; charset=…`) are not part of a kind.
///
/// ```
/// use capability_types::kind_matches;
/// assert!(kind_matches("image", "image/png"));
/// assert!(kind_matches("file", "application/pdf"));
/// assert!(!kind_matches("file", "image/png"));
/// assert!(kind_matches("text/*", "TEXT/Plain"));
/// assert!(!kind_matches("image/png", "image/pngx"));
/// ```
pub fn kind_matches(pattern: &str, kind: &str) -> bool {
    let kind = kind.to_ascii_lowercase();
    let pattern = pattern.to_ascii_lowercase();
    let Some((major, _)) = kind.split_once('/') else {
        return false;
    };
    match pattern.as_str() {
        "*" => true,
        "file" => !matches!(major, "image" | "audio" | "video"),
        class if !class.contains('/') => major == class,
        p => match p.strip_suffix("/*") {
            Some(prefix) => major == prefix,
            None => kind == p,
        },
    }
}

/// Checks a kind pattern: `*`, a class (`image`, `audio`, `video`, `text`, `file`), `type/*` or
/// `type/subtype` with MIME token characters.
pub fn check_kind_pattern(pattern: &str) -> Result<(), String> {
    let token = |t: &str| {
        !t.is_empty()
            && t.len() <= 127
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    let ok = match pattern {
        "*" | "image" | "audio" | "video" | "text" | "file" => true,
        p => match p.split_once('/') {
            Some((major, "*")) => token(major),
            Some((major, minor)) => token(major) && token(minor),
            None => false,
        },
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{pattern:?} is not an attachment kind (a MIME type, type/*, image, audio, video, text, file or *)"
        ))
    }
}

impl Serialize for AttachmentsCapability {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.short && self.kinds.is_none() {
            return s.serialize_str("*");
        }
        let mut map = s.serialize_map(Some(1))?;
        match &self.kinds {
            None => map.serialize_entry("kinds", "*")?,
            Some(kinds) => map.serialize_entry("kinds", kinds)?,
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for AttachmentsCapability {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// `"*"` or a list of patterns.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Kinds {
            Star(String),
            List(Vec<String>),
        }
        fn from_kinds<E: de::Error>(kinds: Kinds, short: bool) -> Result<AttachmentsCapability, E> {
            match kinds {
                Kinds::Star(s) if s == "*" => Ok(AttachmentsCapability { kinds: None, short }),
                Kinds::Star(s) => Err(E::custom(format!(
                    "attachments kinds {s:?}: expected \"*\" or a list"
                ))),
                Kinds::List(list) => AttachmentsCapability::kinds(list).map_err(E::custom),
            }
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = AttachmentsCapability;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"*\" or {\"kinds\": [...]}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                from_kinds(Kinds::Star(v.to_owned()), true)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut kinds = None;
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "kinds" if kinds.is_none() => kinds = Some(map.next_value::<Kinds>()?),
                        "kinds" => return Err(de::Error::duplicate_field("kinds")),
                        other => return Err(de::Error::unknown_field(other, &["kinds"])),
                    }
                }
                from_kinds(
                    kinds.ok_or_else(|| de::Error::missing_field("kinds"))?,
                    false,
                )
            }
        }
        d.deserialize_any(V)
    }
}

/// An attachment as a tool sees it: an opaque id, its kind, a display name and its size.
/// Never a host path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AttachmentInfo {
    /// The id the framework gave it; what [`ScopedAttachments::read`] takes.
    pub id: String,
    /// Its MIME type.
    pub kind: String,
    /// A display name (a file name without directories), for messages.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
}

impl AttachmentInfo {
    /// An attachment's description.
    pub fn new(
        id: impl Into<String>,
        kind: impl Into<String>,
        name: impl Into<String>,
        size: u64,
    ) -> Self {
        Self {
            id: id.into(),
            kind: kind.into(),
            name: name.into(),
            size,
        }
    }
}

/// The attachments of the current call that the tool's declaration and the personality both
/// allow. Another call's attachments, and kinds either side refuses, are not there at all.
///
/// ```
/// # async fn example(ctx: &capability_types::ToolContext) -> Result<(), capability_types::CapabilityError> {
/// let attachments = ctx.attachments()?;
/// for a in attachments.list().await? {
///     let head = attachments.read(&a.id, 0, 1024).await?; // at most 1 KiB, from the start
///     println!("{} ({}, {} bytes): {:?}", a.name, a.kind, a.size, &head[..head.len().min(16)]);
/// }
/// # Ok(()) }
/// ```
#[async_trait]
pub trait ScopedAttachments: Send + Sync {
    /// The attachments this call may read.
    async fn list(&self) -> Result<Vec<AttachmentInfo>, CapabilityError>;
    /// Up to `len` bytes of attachment `id` from `offset` (fewer at its end). `len` above
    /// [`MAX_ATTACHMENT_READ`] is `input_invalid`; an id this call cannot see is
    /// `not_found`, whether or not another call has it.
    async fn read(&self, id: &str, offset: u64, len: usize) -> Result<Bytes, CapabilityError>;
}
