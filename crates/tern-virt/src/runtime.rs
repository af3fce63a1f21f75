//! A tenant's handle on its device: the device's [`Runtime`] (with the device's quotas
//! applied) and a [`PacketPath`] that sends packets through the whole virtual switch.
//!
//! Runtime calls go to the device's own switch; adds that would take the device past its
//! entry quota are refused with `TABLE_FULL` (what BMv2 answers for a full table) before the
//! switch sees them. Packets given to [`PacketPath::process_packet`] arrive on a *physical*
//! port and go through the classifier, links and port maps like any other packet, so the
//! STF runner and the CLI language drive one tenant inside the slice exactly as they drive a
//! native switch.
//!
//! Every write call counts its entries touched in [`crate::DeviceStats::control_work`] (one
//! per call, a table clear the entries it removes): what the fair scheduler charges a
//! device's control jobs for; a call that returns an error also counts in
//! [`crate::DeviceStats::control_refused`] (refusals are priced apart).

use tern_runtime::*;

use crate::{Device, DeviceId, VirtSwitch};

/// Whether a write call's result is a refusal (an error).
pub(crate) trait Refused {
    fn refused(&self) -> bool;
}

impl<T> Refused for RtResult<T> {
    fn refused(&self) -> bool {
        self.is_err()
    }
}

impl Refused for () {
    fn refused(&self) -> bool {
        false
    }
}

/// One device's control and packet handle (see [`VirtSwitch::runtime`]).
pub struct DeviceRuntime<'a> {
    pub(crate) vs: &'a mut VirtSwitch,
    pub(crate) id: DeviceId,
}

impl DeviceRuntime<'_> {
    /// The device this handle controls.
    pub fn device_id(&self) -> DeviceId {
        self.id
    }

    /// The device's program.
    pub fn program(&self) -> &tern_model::Program {
        self.dev().switch.program()
    }

    pub(crate) fn dev(&self) -> &Device {
        self.vs
            .devices
            .get(&self.id)
            .expect("the handle's device exists while it lives")
    }

    fn dev_mut(&mut self) -> &mut Device {
        self.vs
            .devices
            .get_mut(&self.id)
            .expect("the handle's device exists while it lives")
    }
}

impl PacketPath for DeviceRuntime<'_> {
    fn process_packet(&mut self, port: Port, data: &[u8], out: &mut Vec<OutputPacket>) {
        self.vs.process_batch(&[(port, data)], out);
    }

    fn take_digests(&mut self) -> Vec<Digest> {
        self.dev_mut().switch.take_digests()
    }
}

macro_rules! device_method {
    ([ref] $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)?) => {
        fn $name(&self, $($arg: $ty),*) $(-> $ret)? {
            self.dev().switch.$name($($arg),*)
        }
    };
    ([mut] $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)?) => {
        fn $name(&mut self, $($arg: $ty),*) $(-> $ret)? {
            let d = self.dev_mut();
            d.stats.control_work += 1;
            let r = d.switch.$name($($arg),*);
            d.stats.control_refused += u64::from(crate::runtime::Refused::refused(&r));
            r
        }
    };
    ([quota] $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)?) => {
        fn $name(&mut self, $($arg: $ty),*) $(-> $ret)? {
            // Counted refused or not: the quota check is work too.
            let d = self.dev_mut();
            d.stats.control_work += 1;
            let r = match d.check_entry_quota() {
                Ok(()) => d.switch.$name($($arg),*),
                Err(e) => Err(e.into()),
            };
            d.stats.control_refused += u64::from(crate::runtime::Refused::refused(&r));
            r
        }
    };
    ([clear] $name:ident ($t:ident: $tt:ty $(, $arg:ident: $ty:ty)*) $(-> $ret:ty)?) => {
        fn $name(&mut self, $t: $tt $(, $arg: $ty)*) $(-> $ret)? {
            // A table clear touches every entry it removes.
            let d = self.dev_mut();
            let n = d.switch.mt_get_num_entries($t).unwrap_or(0);
            d.stats.control_work += n.max(1);
            let r = d.switch.$name($t $(, $arg)*);
            if crate::runtime::Refused::refused(&r) {
                d.stats.control_refused += n.max(1);
            }
            r
        }
    };
}

/// Every `Runtime` method goes to the device's switch; entry adds check the quota first.
macro_rules! device_runtime {
    ($([$kind:ident] $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $missing:expr;)*) => {
        impl Runtime for DeviceRuntime<'_> {
            $(device_method!([$kind] $name ($($arg: $ty),*) $(-> $ret)?);)*
        }
    };
}

crate::forward::for_each_runtime_method!(device_runtime);
