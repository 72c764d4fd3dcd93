// Files attnbench writes: checked before any work (a report path in a missing or
// read-only directory fails in the first second, not after an hour on the GPU), and
// checked after (a full disk is an error with a message, never a silent short file).
#pragma once
#include <functional>
#include <iosfwd>
#include <string>

namespace attnbench {

// `flag` names the option in messages ("-o", "--dump"). Each throws InputError.
// A file we may create or replace: its directory exists and is writable, and it is
// not itself a directory.
void check_output_file(const std::string& path, const std::string& flag);
// A directory we may write below: it is one (writable), or its parent is.
void check_output_dir(const std::string& dir, const std::string& flag);

// Writes `path` through `write`, then checks the stream, the flush and the close.
// A regular file is written beside it and renamed over it, so readers (and a run
// killed mid-write) only ever see a whole document; a device (/dev/stdout) directly.
void write_file(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace attnbench
