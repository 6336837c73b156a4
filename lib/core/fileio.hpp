// Crash-safe file writing: write to "<path>.tmp.<pid>", fsync, rename over <path>, fsync the
// directory. A reader therefore sees either the old file or the complete new one.
#pragma once
#include <string>
#include <string_view>

namespace skew {

void write_file_atomic(const std::string& path, std::string_view bytes);
std::string read_file(const std::string& path);
void make_directories(const std::string& path);

}  // namespace skew
