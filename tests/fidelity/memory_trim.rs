//! `trim::return_free_memory_to_os` gives memory freed between live allocations back to the
//! kernel: the process's RSS falls by it (glibc on Linux; elsewhere the call does nothing).

use crate::common;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn memory_freed_between_live_blocks_leaves_the_rss_after_a_trim() {
    const BLOCKS: usize = 16 * 1024;
    // 64 MiB in 4 KiB blocks (under glibc's mmap threshold, so from the heap), written so
    // their pages are resident. Every 16th stays live, so the freed ones lie between live
    // blocks, where `free` itself never gives them back (as the status page's outgrown rings).
    let mut blocks: Vec<Vec<u8>> = (0..BLOCKS).map(|_| vec![1u8; 4096]).collect();
    let kept: Vec<Vec<u8>> = blocks.iter_mut().step_by(16).map(std::mem::take).collect();
    drop(blocks);
    let before = common::rss_kib();
    let released = llm_probe::trim::return_free_memory_to_os();
    let after = common::rss_kib();
    assert!(released, "malloc_trim said it released nothing");
    // 15/16 of 64 MiB is free; at least half of the 60 MiB must leave the RSS.
    assert!(
        before.saturating_sub(after) > 30 * 1024,
        "RSS {before} KiB before the trim, {after} KiB after"
    );
    assert_eq!(kept.len(), BLOCKS / 16);
    assert!(kept.iter().all(|b| b.len() == 4096 && b[4095] == 1));
}
