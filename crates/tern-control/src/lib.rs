//! Control interfaces: the simple_switch_CLI runtime command language.
