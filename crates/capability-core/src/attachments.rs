//! Attachments on the host side (docs/semantics.md, "Attachments"): what a framework hands a
//! call ([`Attachment`]), a bounded per-session cache to keep them in ([`AttachmentCache`]),
//! and the [`ScopedAttachments`] a call's tool receives: the call's own attachments whose kind
//! the declaration and the personality both allow, by id, never by path.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use capability_types::{
    AttachmentInfo, AttachmentsCapability, CapabilityError, MAX_ATTACHMENT_READ, ScopedAttachments,
    async_trait, kind_matches,
};

/// One attachment a user gave a turn: an id, a MIME kind, a display name and the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Attachment {
    info: AttachmentInfo,
    data: Bytes,
}

impl fmt::Debug for Attachment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attachment")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl Attachment {
    /// An attachment. `id`: 1–128 of `A-Z a-z 0-9 . _ -`; `kind`: a MIME type `type/subtype`;
    /// `name`: a display name, cut to its last path component, without control characters.
    ///
    /// ```
    /// use capability_core::Attachment;
    /// let a = Attachment::new("att-1", "image/png", "/home/ada/cat.png", vec![0x89, b'P']).unwrap();
    /// assert_eq!(a.info().name, "cat.png");
    /// assert!(Attachment::new("../x", "image/png", "x", vec![]).is_err());
    /// assert!(Attachment::new("a", "png", "x", vec![]).is_err());
    /// ```
    pub fn new(
        id: impl Into<String>,
        kind: impl Into<String>,
        name: &str,
        data: impl Into<Bytes>,
    ) -> Result<Self, CapabilityError> {
        let id = id.into();
        let kind = kind.into().to_ascii_lowercase();
        if id.is_empty()
            || id.len() > 128
            || !id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
            || id == "."
            || id == ".."
        {
            return Err(CapabilityError::invalid_input(format!(
                "attachment id {id:?}: 1-128 characters of A-Z a-z 0-9 . _ -"
            )));
        }
        match kind.split_once('/') {
            Some((major, minor))
                if !major.is_empty()
                    && !minor.is_empty()
                    && minor != "*"
                    && capability_types::check_kind_pattern(&kind).is_ok() => {}
            _ => {
                return Err(CapabilityError::invalid_input(format!(
                    "attachment {id}: kind {kind:?} is not a MIME type (type/subtype)"
                )));
            }
        }
        let base = name.rsplit(['/', '\\']).next().unwrap_or_default();
        let name: String = base.chars().filter(|c| !c.is_control()).take(255).collect();
        let data = data.into();
        let size = data.len() as u64;
        Ok(Self {
            info: AttachmentInfo::new(id, kind, name, size),
            data,
        })
    }

    /// What a tool sees of it.
    pub fn info(&self) -> &AttachmentInfo {
        &self.info
    }
}

/// A session's attachments, bounded in total size: adding one beyond the bound evicts the
/// oldest. A framework keeps one per session and hands each call the ones of its turn
/// ([`ToolCall::with_attachments`](crate::ToolCall::with_attachments)).
///
/// ```
/// use capability_core::{Attachment, AttachmentCache};
/// let cache = AttachmentCache::new(10);
/// cache.insert(Attachment::new("a", "text/plain", "a.txt", "123456").unwrap()).unwrap();
/// cache.insert(Attachment::new("b", "text/plain", "b.txt", "123456").unwrap()).unwrap();
/// assert!(cache.get("a").is_none(), "evicted: 12 bytes do not fit in 10");
/// assert!(cache.get("b").is_some());
/// assert!(cache.insert(Attachment::new("c", "text/plain", "c.txt", vec![0; 11]).unwrap()).is_err());
/// ```
pub struct AttachmentCache {
    max_bytes: u64,
    entries: Mutex<VecDeque<Arc<Attachment>>>,
}

impl fmt::Debug for AttachmentCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AttachmentCache")
            .field("max_bytes", &self.max_bytes)
            .field("held", &self.held())
            .finish()
    }
}

impl AttachmentCache {
    /// A cache holding at most `max_bytes` of attachment data.
    pub fn new(max_bytes: u64) -> Self {
        Self {
            max_bytes,
            entries: Mutex::default(),
        }
    }

    /// Keeps `attachment` (replacing one with the same id), evicting the oldest until it fits.
    /// One larger than the whole cache is refused.
    pub fn insert(&self, attachment: Attachment) -> Result<Arc<Attachment>, CapabilityError> {
        let size = attachment.info.size;
        if size > self.max_bytes {
            return Err(CapabilityError::invalid_input(format!(
                "attachment {} is {size} bytes; the session keeps at most {}",
                attachment.info.id, self.max_bytes
            )));
        }
        let attachment = Arc::new(attachment);
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|a| a.info.id != attachment.info.id);
        let mut held: u64 = entries.iter().map(|a| a.info.size).sum();
        while held + size > self.max_bytes {
            match entries.pop_front() {
                Some(old) => held -= old.info.size,
                None => break,
            }
        }
        entries.push_back(Arc::clone(&attachment));
        Ok(attachment)
    }

    /// The attachment `id`, if the session still has it.
    pub fn get(&self, id: &str) -> Option<Arc<Attachment>> {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|a| a.info.id == id)
            .cloned()
    }

    /// Bytes held now.
    pub fn held(&self) -> u64 {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|a| a.info.size)
            .sum()
    }
}

/// Whether an attachment of `kind` reaches a tool that declared `declared` under a personality
/// that allows `personality`.
pub(crate) fn admitted(
    declared: &AttachmentsCapability,
    personality: &[String],
    kind: &str,
) -> bool {
    declared.allows(kind) && personality.iter().any(|p| kind_matches(p, kind))
}

/// The kind patterns a declaration keeps under a personality (for the manifest and
/// validation): each declared pattern some personality pattern covers, and each personality
/// pattern a declared one covers.
pub(crate) fn effective_kinds(
    declared: &AttachmentsCapability,
    personality: &[String],
) -> Vec<String> {
    let declared: Vec<String> = declared
        .kinds
        .clone()
        .unwrap_or_else(|| vec!["*".to_owned()]);
    let mut out: Vec<String> = Vec::new();
    for d in &declared {
        if personality.iter().any(|p| covers(p, d)) {
            out.push(d.clone());
        }
    }
    for p in personality {
        if !out.iter().any(|o| covers(o, p)) && declared.iter().any(|d| covers(d, p)) {
            out.push(p.clone());
        }
    }
    out
}

/// Declared patterns no personality pattern covers (what validation reports).
pub(crate) fn uncovered_kinds(
    declared: &AttachmentsCapability,
    personality: &[String],
) -> Vec<String> {
    declared
        .kinds
        .clone()
        .unwrap_or_else(|| vec!["*".to_owned()])
        .into_iter()
        .filter(|d| !personality.iter().any(|p| covers(p, d)))
        .collect()
}

/// Whether every kind `inner` matches, `outer` matches too.
pub(crate) fn covers(outer: &str, inner: &str) -> bool {
    let norm = |p: &str| -> String {
        match p {
            "image" | "audio" | "video" | "text" => format!("{p}/*"),
            p => p.to_ascii_lowercase(),
        }
    };
    let (outer, inner) = (norm(outer), norm(inner));
    if outer == "*" || outer == inner {
        return true;
    }
    if inner == "*" {
        return false;
    }
    let major = |p: &str| p.split_once('/').map(|(m, _)| m.to_owned());
    match outer.as_str() {
        "file" => {
            inner != "file"
                && major(&inner).is_some_and(|m| !matches!(m.as_str(), "image" | "audio" | "video"))
        }
        o => match o.strip_suffix("/*") {
            Some(prefix) => inner != "file" && major(&inner).as_deref() == Some(prefix),
            None => false,
        },
    }
}

/// What one call's tool sees: the call's attachments its declaration and the personality
/// allow.
pub(crate) struct CallAttachments {
    visible: Vec<Arc<Attachment>>,
}

impl CallAttachments {
    pub(crate) fn new(
        given: &[Arc<Attachment>],
        declared: &AttachmentsCapability,
        personality: &[String],
    ) -> Self {
        Self {
            visible: given
                .iter()
                .filter(|a| admitted(declared, personality, &a.info.kind))
                .cloned()
                .collect(),
        }
    }

    /// The ids the tool can see (for audit).
    pub(crate) fn ids(&self) -> Vec<String> {
        self.visible.iter().map(|a| a.info.id.clone()).collect()
    }
}

#[async_trait]
impl ScopedAttachments for CallAttachments {
    async fn list(&self) -> Result<Vec<AttachmentInfo>, CapabilityError> {
        Ok(self.visible.iter().map(|a| a.info.clone()).collect())
    }

    async fn read(&self, id: &str, offset: u64, len: usize) -> Result<Bytes, CapabilityError> {
        if len > MAX_ATTACHMENT_READ {
            return Err(CapabilityError::invalid_input(format!(
                "a read of {len} bytes; at most {MAX_ATTACHMENT_READ} per read (read in ranges)"
            )));
        }
        let a = self
            .visible
            .iter()
            .find(|a| a.info.id == id)
            .ok_or_else(|| {
                CapabilityError::not_found(format!("no attachment {id:?} in this call"))
            })?;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(a.data.len());
        let end = start.saturating_add(len).min(a.data.len());
        Ok(a.data.slice(start..end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage() {
        for (outer, inner, want) in [
            ("*", "image/png", true),
            ("image", "image/png", true),
            ("image/*", "image", true),
            ("image/png", "image/*", false),
            ("file", "application/pdf", true),
            ("file", "image/png", false),
            ("file", "*", false),
            ("application/*", "file", false),
            ("file", "file", true),
            ("text", "text/plain", true),
        ] {
            assert_eq!(covers(outer, inner), want, "{outer} ⊇ {inner}");
        }
        let declared = AttachmentsCapability::kinds(["image/*", "application/pdf"]).unwrap();
        assert_eq!(
            effective_kinds(&declared, &["image/png".to_owned()]),
            ["image/png"]
        );
        assert_eq!(
            uncovered_kinds(&declared, &["image".to_owned()]),
            ["application/pdf"]
        );
        assert!(effective_kinds(&declared, &[]).is_empty());
    }
}
