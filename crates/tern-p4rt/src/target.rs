//! What the P4Runtime server drives: a [`P4rtTarget`] is one device — its state behind a lock
//! ([`DeviceState`], a `tern_runtime::Runtime` plus its program), a way to build and install a
//! new program (SetForwardingPipelineConfig), and a way to inject a packet-out. A single
//! shared `Switch` is one target ([`SwitchTarget`], what `tern run --grpc-addr` and
//! `tern p4runtime` serve); one device of a virtual switch is another (`tern-virt`).

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard};

use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{Digest, EntryHandle, OutputPacket, PacketPath, Runtime};

/// One device's control state, as the entity translation uses it.
pub trait DeviceState: Runtime {
    /// The device's program.
    fn program(&self) -> &tern_model::Program;
    /// Entries whose idle timeout has expired (see `Switch::aged_entries`).
    fn aged_entries(&self) -> Vec<(String, EntryHandle)>;
}

impl DeviceState for Switch {
    fn program(&self) -> &tern_model::Program {
        Switch::program(self)
    }
    fn aged_entries(&self) -> Vec<(String, EntryHandle)> {
        Switch::aged_entries(self)
    }
}

/// A locked device: dereferences to its [`DeviceState`] until dropped.
pub struct Locked<'a>(Box<dyn DerefMut<Target = dyn DeviceState + 'a> + 'a>);

impl<'a> Locked<'a> {
    /// Wrap any guard of a device state.
    pub fn new(g: impl DerefMut<Target = dyn DeviceState + 'a> + 'a) -> Locked<'a> {
        Locked(Box::new(g))
    }
}

impl<'a> Deref for Locked<'a> {
    type Target = dyn DeviceState + 'a;
    fn deref(&self) -> &Self::Target {
        &**self.0
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut **self.0
    }
}

/// What one packet-out produced.
#[derive(Default)]
pub struct Injected {
    /// Frames the device sent to its CPU port (become packet-in messages).
    pub packet_ins: Vec<Vec<u8>>,
    /// Frames for the other ports (go to the output sink).
    pub outputs: Vec<OutputPacket>,
    /// Digests the device generated.
    pub digests: Vec<Digest>,
}

/// One P4Runtime device.
pub trait P4rtTarget: Send + Sync {
    /// Lock the device's state for one operation.
    fn lock(&self) -> Locked<'_>;
    /// Build (not install) the device running `json`, with fresh state.
    fn build(&self, json: &str, opts: &SwitchOptions) -> Result<Switch, String>;
    /// Install `sw` as the device (live), returning the switch it replaces.
    fn install(&self, sw: Switch) -> Result<Switch, String>;
    /// Whether the device still exists (a removed device answers like an unknown one).
    fn present(&self) -> bool {
        true
    }
    /// The device's CPU port, when the target knows it better than `Options::cpu_port`.
    fn cpu_port(&self) -> Option<u32> {
        None
    }
    /// Run a packet into the device on `port` (`cpu_port`: where packet-ins leave).
    fn inject(&self, port: u32, data: &[u8], cpu_port: Option<u32>) -> Injected;
}

/// A shared `Switch` as a P4Runtime target.
pub struct SwitchTarget(pub Arc<Mutex<Switch>>);

struct SwitchGuard<'a>(MutexGuard<'a, Switch>);

impl<'a> Deref for SwitchGuard<'a> {
    type Target = dyn DeviceState + 'a;
    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl DerefMut for SwitchGuard<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut *self.0
    }
}

impl SwitchTarget {
    fn guard(&self) -> MutexGuard<'_, Switch> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl P4rtTarget for SwitchTarget {
    fn lock(&self) -> Locked<'_> {
        Locked::new(SwitchGuard(self.guard()))
    }
    fn build(&self, json: &str, opts: &SwitchOptions) -> Result<Switch, String> {
        Switch::from_json(json, opts.clone()).map_err(|e| e.to_string())
    }
    fn install(&self, sw: Switch) -> Result<Switch, String> {
        Ok(std::mem::replace(&mut *self.guard(), sw))
    }
    fn inject(&self, port: u32, data: &[u8], cpu_port: Option<u32>) -> Injected {
        let mut sw = self.guard();
        let mut outs = Vec::new();
        sw.process_packet(port, data, &mut outs);
        let digests = sw.take_digests();
        drop(sw);
        let mut r = Injected {
            digests,
            ..Injected::default()
        };
        for o in outs {
            if Some(o.port) == cpu_port {
                r.packet_ins.push(o.data);
            } else {
                r.outputs.push(o);
            }
        }
        r
    }
}
