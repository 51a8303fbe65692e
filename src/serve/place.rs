//! Where a service runs: its node (the host's name), and, for one of several instances of one
//! run (`serve --instance NAME`), its name and the out root it shares with its siblings (the
//! folder above its own `--out`). Each result says where it was judged (`record::Served`).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::record::Served;

#[derive(Clone, Debug)]
pub struct Place {
    /// `--instance`: None for a service alone.
    pub instance: Option<String>,
    pub node: String,
    /// The out root of the run's instances (None: a service alone).
    pub siblings: Option<PathBuf>,
}

impl Place {
    /// The place of a service writing to `out`, named `instance` when one of several; an
    /// instance name must be a plain name (it names its folder in the merge).
    pub fn new(instance: Option<&str>, out: &Path) -> Result<Place> {
        if let Some(name) = instance {
            let plain = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
            if name.is_empty()
                || name.len() > 64
                || name.starts_with('.')
                || !name.chars().all(plain)
            {
                return Err(Error::Usage(format!(
                    "--instance {name:?}: 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'"
                )));
            }
        }
        Ok(Place {
            instance: instance.map(str::to_string),
            node: node(),
            siblings: instance.and(out.parent()).map(Path::to_path_buf),
        })
    }

    /// Where a request of `id` is judged here (its GPU is the slot's, once known).
    pub fn served(&self, id: Option<&str>) -> Served {
        Served {
            id: id.map(str::to_string),
            instance: self.instance.clone().unwrap_or_default(),
            node: self.node.clone(),
            gpu: None,
        }
    }
}

/// The host's name (the kernel's node name).
pub fn node() -> String {
    let uname = rustix::system::uname();
    uname.nodename().to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_is_named_plainly_and_shares_the_folder_above_its_own() {
        let out = Path::new("runs/serve/node3-gpu0");
        let place = Place::new(Some("node3-gpu0"), out).unwrap();
        assert_eq!(place.siblings.as_deref(), Some(Path::new("runs/serve")));
        assert!(!place.node.is_empty());
        let served = place.served(Some("r1"));
        assert_eq!(
            (served.id.as_deref(), served.instance.as_str()),
            (Some("r1"), "node3-gpu0")
        );
        assert_eq!(Place::new(None, out).unwrap().siblings, None);
        for bad in ["", "../x", "a/b", ".hidden", "a b"] {
            assert!(Place::new(Some(bad), out).is_err(), "{bad}");
        }
    }
}
