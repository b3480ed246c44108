//! An Ethos personality's file reach (docs/policy.md, "Ethos personality directories"):
//! `fs_reach.read`, `write` and `workdir` as Ethos derives them, its defaults included.

use std::path::{Path, PathBuf};

use crate::ethos::EthosVars;
use crate::{PersonalityPolicy, PolicyError};

/// `fs_reach.*` as declared.
#[derive(Default)]
pub(crate) struct EthosReach {
    pub(crate) read: Option<Vec<String>>,
    pub(crate) write: Option<Vec<String>>,
    pub(crate) workdir: Option<String>,
}

impl EthosReach {
    /// Ethos's derivation: declared lists win when non-empty, else the defaults
    /// (`read = [own dir, ${ETHOS_HOME}/skills, workdir]`, `write = [own dir, workdir]`); a
    /// declared workdir is added to both.
    pub(crate) fn apply(
        self,
        id: &str,
        vars: EthosVars<'_>,
        home: Option<&Path>,
        policy: &mut PersonalityPolicy,
    ) -> Result<(), PolicyError> {
        // An entry is substituted, then read where Ethos reads it: Ethos expands no `~` and
        // resolves what is not absolute against the current directory (`path.resolve`), so
        // `~/notes` is `<cwd>/~/notes` there, and here too, never the home directory's notes,
        // which would be more than the personality has in Ethos.
        let sub = |field: &str, text: &str, cwd: &Path| {
            substitute(field, text, id, vars, cwd).map(|path| vars.cwd.join(path))
        };
        let workdir = match &self.workdir {
            Some(w) => sub("fs_reach.workdir", w, vars.cwd)?,
            None => vars.cwd.to_path_buf(),
        };
        let own = vars.ethos_home.join("personalities").join(id);
        let list =
            |field: &str, declared: &Option<Vec<String>>, defaults: Vec<PathBuf>| match declared {
                Some(items) if !items.is_empty() => items
                    .iter()
                    .map(|t| sub(field, t, &workdir))
                    .collect::<Result<Vec<_>, _>>(),
                _ => Ok(defaults),
            };
        // A current directory at or inside a state dir is no default root (UBP-047): it would
        // reach the state dir from within, past its being kept apart (docs/policy.md, "Ethos
        // personality directories").
        let in_state = |dir: &Path| {
            let dir = crate::normalize_lexically(dir);
            (home.map(|h| h.join(".ethos")).into_iter())
                .chain([vars.ethos_home.to_path_buf()])
                .any(|state| dir.starts_with(crate::normalize_lexically(&state)))
        };
        let default_workdir: Vec<PathBuf> = Some(workdir.clone())
            .filter(|w| self.workdir.is_some() || !in_state(w))
            .into_iter()
            .collect();
        let mut read = list(
            "fs_reach.read",
            &self.read,
            [own.clone(), vars.ethos_home.join("skills")]
                .into_iter()
                .chain(default_workdir.iter().cloned())
                .collect(),
        )?;
        let mut write = list(
            "fs_reach.write",
            &self.write,
            [own].into_iter().chain(default_workdir).collect(),
        )?;
        if self.workdir.is_some() {
            for l in [&mut read, &mut write] {
                if !l.iter().any(|p| p == &workdir) {
                    l.insert(0, workdir.clone());
                }
            }
        }
        // A reach of `/` made from the current directory (its default, `${CWD}`, a relative
        // entry) is the whole file system: an MCP client may start its servers in `/` (Claude
        // Desktop does). Refused, where Ethos would reach everything (docs/policy.md, "Ethos
        // personality directories"). A `/` the personality writes out is its author's choice.
        let slash = |root: &Path| crate::normalize_lexically(root) == Path::new("/");
        let written_out = |declared: Option<&Vec<String>>| {
            declared
                .into_iter()
                .flatten()
                .chain(self.workdir.as_ref())
                .map(|t| t.trim())
                .any(|t| !t.contains("${") && Path::new(t).is_absolute() && slash(Path::new(t)))
        };
        for (field, roots, declared) in [
            ("fs_reach.read", &read, self.read.as_ref()),
            ("fs_reach.write", &write, self.write.as_ref()),
        ] {
            if roots.iter().any(|root| slash(root)) && !written_out(declared) {
                let why = if crate::normalize_lexically(vars.cwd) == Path::new("/") {
                    "toolcap's current directory is /, and an Ethos personality's working \
                     directory and default reach are the current directory; start toolcap in \
                     the project's directory (for an MCP client that starts servers in /: \
                     sh -c 'cd PROJECT && exec toolcap mcp serve ...')"
                } else {
                    "name the places it needs"
                };
                return Err(PolicyError::invalid(
                    field,
                    format!("the reach would be / (the whole file system): {why}"),
                ));
            }
        }
        policy.fs_reach.read = read;
        policy.fs_reach.write = write;
        Ok(())
    }
}

/// `${ETHOS_HOME}`, `${self}` and `${CWD}` replaced; an empty value is an error, as in Ethos.
fn substitute(
    field: &str,
    text: &str,
    id: &str,
    vars: EthosVars<'_>,
    cwd: &Path,
) -> Result<String, PolicyError> {
    let mut out = text.trim().to_owned();
    for (token, value) in [
        (
            "${ETHOS_HOME}",
            vars.ethos_home.to_string_lossy().into_owned(),
        ),
        ("${self}", id.to_owned()),
        ("${CWD}", cwd.to_string_lossy().into_owned()),
    ] {
        if out.contains(token) {
            if value.is_empty() {
                return Err(PolicyError::invalid(
                    field,
                    format!("{token} is empty in {text:?}"),
                ));
            }
            out = out.replace(token, &value);
        }
    }
    if out.contains("${") {
        return Err(PolicyError::invalid(
            field,
            format!("{text:?} has a substitution other than ${{ETHOS_HOME}}, ${{self}}, ${{CWD}}"),
        ));
    }
    Ok(out)
}
