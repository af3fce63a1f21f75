//! A device's runtime API shared across threads: [`SharedDevice`] acts for one caller on one
//! device, so a control server (BMv2's Thrift API through `tern_thrift::serve`) can be run per
//! tenant while packets flow. Each call locks the whole [`VirtSwitch`] (one thread) or leases
//! the shard of the worker that holds the device ([`crate::VirtWorkers`]; see
//! [`crate::Shared`]).

use tern_runtime::*;

use crate::{Caller, DeviceId, Shared, SwitchGuard, VirtError};

/// One device's [`Runtime`], for one caller, over a shared switch ([`Shared`]). Every call
/// re-checks that the caller reaches the device; once the device is gone (or was never the
/// caller's), calls fail with `TableError::ERROR`-family codes and getters return empty
/// values, exactly as for a device that does not exist.
#[derive(Clone, Debug)]
pub struct SharedDevice {
    vs: Shared,
    owner: Option<String>,
    id: DeviceId,
}

fn gone() -> RuntimeError {
    TableError::ERROR.into()
}

impl SharedDevice {
    /// A handle for `caller` on device `id`; refused exactly like a missing device when the
    /// caller does not reach it.
    pub fn new(
        vs: impl Into<Shared>,
        caller: Caller,
        id: DeviceId,
    ) -> Result<SharedDevice, VirtError> {
        let vs = vs.into();
        let owner = match caller {
            Caller::Operator => None,
            Caller::Tenant(t) => Some(t.to_string()),
        };
        let h = SharedDevice { vs, owner, id };
        h.lock()?.reachable(h.caller(), id)?;
        Ok(h)
    }

    /// The device this handle controls.
    pub fn device_id(&self) -> DeviceId {
        self.id
    }

    fn caller(&self) -> Caller<'_> {
        match &self.owner {
            None => Caller::Operator,
            Some(t) => Caller::Tenant(t),
        }
    }

    fn lock(&self) -> Result<SwitchGuard<'_>, VirtError> {
        self.vs.lock(self.id)
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut crate::DeviceRuntime<'_>) -> T,
        missing: impl FnOnce() -> T,
    ) -> T {
        let Ok(mut vs) = self.lock() else {
            return missing();
        };
        match vs.runtime(self.caller(), self.id) {
            Ok(mut rt) => f(&mut rt),
            Err(_) => missing(),
        }
    }
}

macro_rules! shared_method {
    ([ref] $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $missing:expr) => {
        fn $name(&self, $($arg: $ty),*) $(-> $ret)? {
            self.with(|rt| rt.$name($($arg),*), || $missing)
        }
    };
    ([$kind:ident] $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $missing:expr) => {
        fn $name(&mut self, $($arg: $ty),*) $(-> $ret)? {
            self.with(|rt| rt.$name($($arg),*), || $missing)
        }
    };
}

/// Every `Runtime` method goes through the lock to the device, if the caller still reaches it.
macro_rules! shared_runtime {
    ($([$kind:ident] $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $missing:expr;)*) => {
        impl Runtime for SharedDevice {
            $(shared_method!([$kind] $name ($($arg: $ty),*) $(-> $ret)? => $missing);)*
        }
    };
}

crate::forward::for_each_runtime_method!(shared_runtime);
