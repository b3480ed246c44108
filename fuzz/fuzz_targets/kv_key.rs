//! Key-value keys and namespaces: whatever the key, a value set in one namespace is read back
//! there and is invisible from a namespace that is a prefix or an extension of it.
#![no_main]

use std::sync::OnceLock;

use capability_kv::{KvBackend, KvLimits, MemoryStore};
use capability_types::{StorageScope};
use capability_types::backend::{KvStoreFactory, StorageGrant};
use libfuzzer_sys::fuzz_target;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (namespace, key) = text.split_once('\n').unwrap_or(("session:a", text));
    if namespace.is_empty() {
        return;
    }
    let backend = KvBackend::new(MemoryStore::new(), KvLimits::default());
    let store = |ns: &str| {
        backend
            .kv_store(StorageGrant::new("t", StorageScope::Session, ns, None))
            .expect("a store")
    };
    let mine = store(namespace);
    let longer = store(&format!("{namespace}:x"));
    let value = serde_json::json!({"k": key});
    runtime().block_on(async {
        if mine.set(key, value.clone(), None).await.is_err() {
            return;
        }
        assert_eq!(mine.get(key).await.expect("a get"), Some(value));
        assert_eq!(longer.get(key).await.expect("a get"), None);
        assert!(
            !longer
                .list("")
                .await
                .expect("a list")
                .iter()
                .any(|k| k == key)
        );
        if let Some((shorter, _)) = namespace.rsplit_once(':') {
            if !shorter.is_empty() {
                let shorter = store(shorter);
                assert_eq!(shorter.get(key).await.expect("a get"), None);
            }
        }
    });
});
