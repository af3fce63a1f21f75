//! The packet engine: turns a program model into an executable program and runs packets through it.
