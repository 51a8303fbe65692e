//! The build cache's key, and the MAC under it that authenticates each cached build record: a
//! record is reused only when its MAC, over the build folder's name and the record's bytes (which
//! hold its artifacts' hash), verifies. The key is drawn once per cache from the OS generator and
//! kept in a file of mode 0600 in the cache's root, which nothing bound into the sandbox
//! contains, so confined submission code, which writes its own build folder, cannot forge a
//! record. Unconfined (`--sandbox off`, or a host that refuses the namespaces) submission code
//! runs with kbench's rights and can read the key: then nothing is protected.

use std::io::{self, Write};
use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The key's file in the cache's root.
const FILE: &str = "build-records.key";
const LEN: usize = 32;

/// The cache's key for build records.
pub struct CacheKey(Vec<u8>);

impl CacheKey {
    /// The key of the cache at `cache`, made there first if it has none (by one run of several
    /// that start at once: the others read it).
    pub fn open(cache: &Path) -> io::Result<CacheKey> {
        let path = cache.join(FILE);
        match std::fs::read(&path) {
            Ok(bytes) if bytes.len() == LEN => return Ok(CacheKey(bytes)),
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is not a key of {LEN} bytes", path.display()),
                ))
            }
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            Err(_) => {}
        }
        use rand::RngCore;
        let mut bytes = vec![0u8; LEN];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        std::fs::create_dir_all(cache)?;
        // Written whole beside it (a temporary file is mode 0600), then linked in unless another
        // run was first.
        let mut file = tempfile::NamedTempFile::new_in(cache)?;
        file.write_all(&bytes)?;
        match file.persist_noclobber(&path) {
            Ok(_) => Ok(CacheKey(bytes)),
            Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => CacheKey::open(cache),
            Err(e) => Err(e.error),
        }
    }

    /// The MAC of the record `record` of the build folder named `folder`.
    pub fn sign(&self, folder: &str, record: &[u8]) -> Vec<u8> {
        self.mac(folder, record).finalize().into_bytes().to_vec()
    }

    /// Whether `tag` is the MAC of `record` in the build folder named `folder`.
    pub fn verifies(&self, folder: &str, record: &[u8], tag: &[u8]) -> bool {
        self.mac(folder, record).verify_slice(tag).is_ok()
    }

    /// HMAC-SHA256 over each part after its length, so no two (folder, record) read the same.
    fn mac(&self, folder: &str, record: &[u8]) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        for part in [folder.as_bytes(), record] {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part);
        }
        mac
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_keeps_its_key_private_and_the_mac_binds_folder_and_record() {
        use std::os::unix::fs::PermissionsExt;
        let cache = tempfile::tempdir().unwrap();
        let key = CacheKey::open(cache.path()).unwrap();
        let mode = std::fs::metadata(cache.path().join(FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let tag = key.sign("ab", b"{}");
        assert!(CacheKey::open(cache.path())
            .unwrap()
            .verifies("ab", b"{}", &tag));
        assert!(!key.verifies("ab", b"{ }", &tag));
        assert!(!key.verifies("cd", b"{}", &tag));
        assert!(!key.verifies("ab", b"{}", &[]));
        let other = tempfile::tempdir().unwrap();
        assert!(!CacheKey::open(other.path())
            .unwrap()
            .verifies("ab", b"{}", &tag));
    }
}
