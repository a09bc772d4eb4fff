//! Locks that stay usable after a panic: the one way Switchboard takes a `std::sync` lock.
//!
//! A thread that panics while holding a `std::sync` lock poisons it, and every later `lock()`
//! returns an error. What Switchboard guards with these locks (maps of sessions, counters,
//! caches) is left whole between statements, so a poisoned lock is taken as it is: one panicked
//! task must not stop every other call that needs the same lock.

// The one place the workspace's lint against these methods (clippy.toml) does not apply.
#![allow(clippy::disallowed_methods)]

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The mutex's guard, even after a panic elsewhere poisoned it.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The lock's read guard, even after a panic elsewhere poisoned it.
pub fn read<T: ?Sized>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The lock's write guard, even after a panic elsewhere poisoned it.
pub fn write<T: ?Sized>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_poisoned_by_a_panic_is_still_taken_with_what_it_held() {
        let mutex = std::sync::Arc::new(Mutex::new(1));
        let rw = std::sync::Arc::new(RwLock::new(2));
        let (m, r) = (mutex.clone(), rw.clone());
        let panicked = std::thread::spawn(move || {
            let _held = m.lock();
            let _written = r.write();
            panic!("poisons both locks");
        })
        .join();
        assert!(panicked.is_err());
        assert!(mutex.lock().is_err() && rw.read().is_err());
        *lock(&mutex) += 1;
        *write(&rw) += 1;
        assert_eq!((*lock(&mutex), *read(&rw)), (2, 3));
    }
}
