//! Where the control handles ([`crate::SharedDevice`], [`crate::VirtTarget`]) find a device's
//! state: [`Shared`] is either one [`VirtSwitch`] behind a mutex, or the shards of
//! [`crate::VirtWorkers`] reached through a [`WorkerControl`]. Locking a device of the
//! workers *leases* the shard of the worker that owns it: the request goes down that worker's
//! own channel, the worker stops between two rounds and lends its shard to the caller until
//! the [`Lease`] is dropped. Only that worker waits (its other devices' packets queue meanwhile);
//! the other workers and the packet front never take a lock for it. A device moving between
//! workers stays reachable: the front updates the routes under their write lock while it
//! hands the device over, so a lease asked before the move reaches the old worker before the
//! device leaves it, and one asked after reaches the new worker after the device arrived.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::{mpsc, Arc, Mutex, MutexGuard, RwLock};

use tern_dataplane::CompiledProgram;

use crate::workers::{Mailbox, Msg};
use crate::{DeviceId, VirtError, VirtSwitch};

/// A virtual switch shared by control threads (see the module documentation).
#[derive(Clone)]
pub enum Shared {
    /// One switch behind a mutex (every call locks the whole switch).
    Locked(Arc<Mutex<VirtSwitch>>),
    /// Devices on worker threads; a call leases the owning worker's shard.
    Workers(WorkerControl),
}

impl From<Arc<Mutex<VirtSwitch>>> for Shared {
    fn from(vs: Arc<Mutex<VirtSwitch>>) -> Shared {
        Shared::Locked(vs)
    }
}

impl From<WorkerControl> for Shared {
    fn from(c: WorkerControl) -> Shared {
        Shared::Workers(c)
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shared::Locked(_) => f.write_str("Shared::Locked"),
            Shared::Workers(_) => f.write_str("Shared::Workers"),
        }
    }
}

impl Shared {
    /// The switch (or the shard) holding device `id`, exclusively until the guard is
    /// dropped. With workers, a device that is not on any worker (removed, never added, or
    /// the workers stopped) is [`VirtError::NoSuchDevice`]; with one switch the guard is
    /// always given and the device may be missing from it.
    pub fn lock(&self, id: DeviceId) -> Result<SwitchGuard<'_>, VirtError> {
        match self {
            Shared::Locked(m) => Ok(SwitchGuard::Locked(
                // Device panics are caught inside the switch; a poisoned lock still holds a
                // consistent switch.
                m.lock().unwrap_or_else(|e| e.into_inner()),
            )),
            Shared::Workers(c) => c.lease(id).map(SwitchGuard::Lease),
        }
    }

    /// The device ids, ascending.
    pub fn device_ids(&self) -> Vec<DeviceId> {
        match self {
            Shared::Locked(m) => m.lock().unwrap_or_else(|e| e.into_inner()).device_ids(),
            Shared::Workers(c) => c.device_ids(),
        }
    }

    /// Whether device `id` exists (with workers: is on a worker; no lease taken).
    pub fn has_device(&self, id: DeviceId) -> bool {
        match self {
            Shared::Locked(m) => m
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .devices
                .contains_key(&id),
            Shared::Workers(c) => c.worker_of(id).is_some(),
        }
    }

    /// Compile `json` once, outside any lock the packet path takes, and keep it where the
    /// next `add_device`/`replace_device` of that JSON finds it; the returned handle keeps
    /// it there until dropped.
    pub fn precompile(&self, json: &str) -> Result<CompiledProgram, String> {
        match self {
            Shared::Locked(m) => {
                let cp = {
                    let g = m.lock().unwrap_or_else(|e| e.into_inner());
                    g.programs.iter().find(|p| p.json() == json).cloned()
                };
                let cp = match cp {
                    Some(cp) => cp,
                    None => compile(json)?,
                };
                m.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .adopt_program(&cp);
                Ok(cp)
            }
            Shared::Workers(c) => c.precompile(json),
        }
    }
}

fn compile(json: &str) -> Result<CompiledProgram, String> {
    CompiledProgram::compile(json, &tern_dataplane::SwitchOptions::default())
        .map_err(|e| e.to_string())
}

/// A locked switch or a leased shard.
pub enum SwitchGuard<'a> {
    Locked(MutexGuard<'a, VirtSwitch>),
    Lease(Lease),
}

impl Deref for SwitchGuard<'_> {
    type Target = VirtSwitch;
    fn deref(&self) -> &VirtSwitch {
        match self {
            SwitchGuard::Locked(g) => g,
            SwitchGuard::Lease(l) => l,
        }
    }
}

impl DerefMut for SwitchGuard<'_> {
    fn deref_mut(&mut self) -> &mut VirtSwitch {
        match self {
            SwitchGuard::Locked(g) => g,
            SwitchGuard::Lease(l) => l,
        }
    }
}

/// A worker's shard, lent to a control thread; the worker waits until this is dropped.
pub struct Lease {
    shard: NonNull<VirtSwitch>,
    /// The device the lease was taken for.
    id: DeviceId,
    /// Dropping it lets the worker go on.
    _release: mpsc::Sender<()>,
}

impl Drop for Lease {
    /// A lease dropped while its thread unwinds (a tenant's control call panicked halfway
    /// through the device's state) quarantines the device, as a panic in a job on the worker
    /// does; the worker then goes on with its other devices.
    fn drop(&mut self) {
        if std::thread::panicking() {
            let id = self.id;
            // SAFETY: as in `deref_mut`: `_release` is dropped after this body, so the
            // worker still waits and the lease is the shard's only user.
            unsafe { self.shard.as_mut() }
                .quarantine_after_job_panic(id, "a control call panicked while holding the lease");
        }
    }
}

/// The shard's address on its way from the worker to the leasing thread.
struct ShardPtr(NonNull<VirtSwitch>);

// SAFETY: the pointer is only dereferenced by the leasing thread while the worker that owns
// the shard is blocked waiting for the lease's release (see `WorkerControl::lease`); the
// `VirtSwitch` itself is `Send` (shards are moved into worker threads).
unsafe impl Send for ShardPtr {}

impl Deref for Lease {
    type Target = VirtSwitch;
    fn deref(&self) -> &VirtSwitch {
        // SAFETY: the worker lent its shard (a `&mut VirtSwitch` it holds on its stack) and
        // blocks until `_release` is dropped, touching nothing meanwhile; the channel hand-off
        // orders the worker's earlier writes before ours and ours before its later ones.
        unsafe { self.shard.as_ref() }
    }
}

impl DerefMut for Lease {
    fn deref_mut(&mut self) -> &mut VirtSwitch {
        // SAFETY: as in `deref`; the lease is the only user of the shard while it lives.
        unsafe { self.shard.as_mut() }
    }
}

/// The routes to the workers' shards, shared by the front and the control threads.
#[derive(Clone)]
pub struct WorkerControl {
    /// Device → worker; written by the front under the write lock across a hand-over.
    pub(crate) routes: Arc<RwLock<BTreeMap<DeviceId, usize>>>,
    /// The workers' mailboxes, by worker index.
    pub(crate) boxes: Vec<Arc<Mailbox>>,
    /// The front's device factory (its cache of compiled programs).
    pub(crate) factory: Arc<Mutex<VirtSwitch>>,
}

impl WorkerControl {
    /// The devices on the workers, ascending.
    pub fn device_ids(&self) -> Vec<DeviceId> {
        self.routes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .copied()
            .collect()
    }

    /// The worker holding device `id` now.
    pub fn worker_of(&self, id: DeviceId) -> Option<usize> {
        self.routes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .copied()
    }

    /// Lease the shard of the worker that holds device `id`. The lease is control work of
    /// device `id` in its fair share (`Msg::Post`): it starts in the device's turn of its
    /// worker's scheduler and the time it is held is charged to the device, so a tenant's
    /// flood of runtime calls (Thrift, P4Runtime) waits for its own turns and spends its
    /// own share, instead of stopping the worker between any two rounds for free. Never hold
    /// two leases at once from one thread.
    pub fn lease(&self, id: DeviceId) -> Result<Lease, VirtError> {
        let (reply_tx, reply_rx) = mpsc::channel::<(ShardPtr, mpsc::Sender<()>)>();
        {
            // Sent under the read lock: a hand-over (write lock) is ordered before or after.
            let routes = self.routes.read().unwrap_or_else(|e| e.into_inner());
            let w = *routes.get(&id).ok_or(VirtError::NoSuchDevice(id))?;
            self.boxes[w]
                .post(Msg::Post(
                    id,
                    crate::fair::Job::Once(Box::new(move |vs| {
                        let (release_tx, release_rx) = mpsc::channel::<()>();
                        let ptr = ShardPtr(NonNull::from(vs));
                        if reply_tx.send((ptr, release_tx)).is_ok() {
                            // Lent: wait until the lease is dropped (its sender disconnects).
                            let _ = release_rx.recv();
                        }
                    })),
                ))
                .map_err(|_| VirtError::NoSuchDevice(id))?;
        }
        let (ShardPtr(shard), release) =
            reply_rx.recv().map_err(|_| VirtError::NoSuchDevice(id))?;
        Ok(Lease {
            shard,
            id,
            _release: release,
        })
    }

    fn precompile(&self, json: &str) -> Result<CompiledProgram, String> {
        let cached = {
            let f = self.factory.lock().unwrap_or_else(|e| e.into_inner());
            f.programs.iter().find(|p| p.json() == json).cloned()
        };
        let cp = match cached {
            Some(cp) => cp,
            None => compile(json)?,
        };
        self.factory
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .adopt_program(&cp);
        Ok(cp)
    }
}
