//! Known-answer tests: every named CRC BMv2 registers, against the check value the CRC
//! catalogue publishes for the input "123456789", computed through the same `resolve` +
//! `compute` path the engine uses.

use tern_hash::{compute, resolve, Algo};

const CHECK: &[u8] = b"123456789";

fn check(name: &str) -> u64 {
    let algo = resolve(name);
    assert!(
        matches!(algo, Algo::Crc { .. }),
        "{name} resolved to {algo:?}, not a CRC"
    );
    compute(&algo, CHECK, &mut 0)
}

#[test]
fn named_crc_catalogue() {
    let cases: &[(&str, u64)] = &[
        ("crc_8", 0xF4),
        ("crc8_custom", 0xF4),
        ("crc_8_darc", 0x15),
        ("crc_8_i_code", 0x7E),
        ("crc_8_itu", 0xA1),
        ("crc_8_maxim", 0xA1),
        ("crc_8_rohc", 0xD0),
        ("crc_8_wcdma", 0x25),
        ("crc16", 0xBB3D),
        ("crc_16", 0xBB3D),
        ("crc16_custom", 0xBB3D),
        ("crc_16_buypass", 0xFEE8),
        ("crc_16_dds_110", 0x9ECF),
        ("crc_16_dect", 0x007E),
        ("crc_16_dnp", 0xEA82),
        ("crc_16_en_13757", 0xC2B7),
        ("crc_16_genibus", 0xD64E),
        ("crc_16_maxim", 0x44C2),
        ("crc_16_mcrf4xx", 0x6F91),
        ("crc_16_riello", 0x63D0),
        ("crc_16_t10_dif", 0xD0DB),
        ("crc_16_teledisk", 0x0FB3),
        ("crc_16_usb", 0xB4C8),
        ("x_25", 0x906E),
        ("xmodem", 0x31C3),
        ("modbus", 0x4B37),
        ("kermit", 0x2189),
        ("crcCCITT", 0x29B1),
        ("crc_ccitt_false", 0x29B1),
        ("crc_aug_ccitt", 0xE5CC),
        ("crc32", 0xCBF4_3926),
        ("crc_32", 0xCBF4_3926),
        ("crc32_custom", 0xCBF4_3926),
        ("crc_32_bzip2", 0xFC89_1918),
        ("crc_32c", 0xE306_9283),
        ("crc_32d", 0x8731_5576),
        ("crc_32_mpeg", 0x0376_E6E7),
        ("posix", 0x765E_7680),
        ("crc_32q", 0x3010_BF7F),
        ("jamcrc", 0x340B_C6D9),
        ("xfer", 0xBD0B_E338),
        ("crc_64_we", 0x62EC_59E3_F1A4_F00A),
        ("crc_64_jones", 0xCAA7_1716_8609_F281),
    ];
    let mut wrong = Vec::new();
    for &(name, want) in cases {
        let got = check(name);
        if got != want {
            wrong.push(format!("{name}: got {got:#x}, want {want:#x}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "check values differ:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn parametric_names_match_their_named_twins() {
    let pairs = [
        (
            "poly_0x11021_init_0xffff_xout_0x0_not_rev",
            "crc_ccitt_false",
        ),
        ("poly_0x18005", "crc_16"),
        ("poly_0x104c11db7_init_0xffffffff_xout_0xffffffff", "crc_32"),
        (
            "poly_0x11edc6f41_init_0xffffffff_xout_0xffffffff",
            "crc_32c",
        ),
        ("poly_0x107_not_rev", "crc_8"),
    ];
    for (param, named) in pairs {
        assert_eq!(check(param), check(named), "{param} vs {named}");
    }
}

#[test]
fn unknown_and_malformed_names_are_unsupported_not_panics() {
    for name in [
        "",
        "poly",
        "poly_",
        "poly_0x",
        "poly_0xzz",
        "poly_0x1_init",
        "poly_0x11021_init_0xzz",
        "poly_0x11021_bogus_1",
        "no_such_hash",
    ] {
        assert!(
            matches!(resolve(name), Algo::Unsupported(_)),
            "{name:?} should be unsupported, got {:?}",
            resolve(name)
        );
    }
}

#[test]
fn non_crc_algorithms() {
    let mut rr = 0;
    // identity: the first up-to-8 bytes, big-endian.
    assert_eq!(compute(&resolve("identity"), &[1, 2, 3], &mut rr), 0x010203);
    assert_eq!(
        compute(&resolve("identity"), &[1, 2, 3, 4, 5, 6, 7, 8, 9], &mut rr),
        0x0102_0304_0506_0708
    );
    // xor16 / xor32 with zero padding of the last word.
    assert_eq!(
        compute(&resolve("xor16"), &[0x12, 0x34, 0x56], &mut rr),
        0x1234 ^ 0x5600
    );
    assert_eq!(
        compute(&resolve("xor32"), &[1, 2, 3, 4, 5], &mut rr),
        0x0102_0304 ^ 0x0500_0000
    );
    // round_robin counts calls, ignoring input.
    let rr_algo = resolve("round_robin");
    let mut state = 0;
    let seq: Vec<u64> = (0..3)
        .map(|i| compute(&rr_algo, &[i], &mut state))
        .collect();
    assert_eq!(seq, vec![0, 1, 2]);
    // bmv2_hash is xxHash64 with seed 0.
    assert_eq!(
        compute(&resolve("bmv2_hash"), b"", &mut rr),
        0xEF46_DB37_51D8_E999
    );
    // hash_ex treats bytes as signed chars.
    let h = resolve("hash_ex");
    assert_ne!(compute(&h, &[0x80], &mut rr), compute(&h, &[0x00], &mut rr));
    assert_eq!(compute(&h, b"abc", &mut rr), 0x0206_2503);
    // Values computed independently from the reference's description (bytes >= 0x80 are
    // sign-extended before the xor).
    assert_eq!(compute(&h, &[0x80, 0xff, 0x01], &mut rr), 0x4fa3_9630);
}

#[test]
fn parametric_name_rules() {
    // Widths other than 8/16/32/64, a missing implicit top bit, unknown tokens: invalid.
    for name in [
        "poly_0x1021",
        "poly_0x3021",
        "poly_0x1102",
        "poly_0x11021_lsb",
        "poly_0x11021_not",
        "poly_0x11021_not_lsb",
        "poly_0x11021_init",
        "poly_0x11021_init_ffff",
    ] {
        assert!(!tern_hash::is_known(name), "{name} must be rejected");
    }
    for name in [
        "poly_0x107",
        "poly_0x0107",
        "poly_0x11021_init_0xffff",
        "poly_0x11021_xout_0x0_not_rev_init_0x1",
        "poly_0x1000000000000001b",
    ] {
        assert!(tern_hash::is_known(name), "{name} must load");
    }
    assert!(!tern_hash::is_known("random"));
}
