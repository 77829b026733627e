//! Which filesystem a directory is on: its device and the type mounted from it, which the
//! writer's defaults depend on (casefold.rs, journal.rs).

use std::path::Path;

/// DIR, or when it does not exist yet the nearest directory above it that does (where it will
/// be made), and the `major:minor` of the filesystem it is on.
pub fn device_of(dir: &Path) -> Option<(&Path, u32, u32)> {
    let dir = dir.ancestors().find(|d| d.as_os_str().is_empty() || d.is_dir())?;
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let dev = std::os::unix::fs::MetadataExt::dev(&std::fs::metadata(dir).ok()?);
    Some((dir, libc::major(dev), libc::minor(dev)))
}

/// The type of the filesystem mounted from device `major:minor`, from /proc/self/mountinfo
/// (field 3 is `major:minor`; the type follows the ` - ` separator).
pub fn mount_type(major: u32, minor: u32) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let dev = format!("{major}:{minor}");
    info.lines().find_map(|line| {
        let (mount, fs) = line.split_once(" - ")?;
        (mount.split(' ').nth(2)? == dev).then(|| fs.split(' ').next().map(str::to_string))?
    })
}
