// Integrity checks of tensor bytes for checkpoints: CRC-32C (Castagnoli, the polynomial of
// iSCSI/ext4/RocksDB; SSE4.2 where present, else table-driven; no dependency) and a scan for
// NaN/inf values.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/tensor.hpp"

namespace skew {

// CRC-32C of `bytes` bytes at `data`, continuing from `crc` (0 to start): crc32c("123456789") is
// 0xe3069283.
// Uses SSE4.2's crc32 instruction where the CPU has it, else crc32c_table_driven.
std::uint32_t crc32c(const void* data, std::size_t bytes, std::uint32_t crc = 0);
// The CRC-32C of A followed by B from crc32c(A), crc32c(B) and B's length: pieces of a file
// summed out of order (or on several threads) give the file's CRC.
std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t bytes_b);
// The portable byte-at-a-time version (~450 MB/s).
std::uint32_t crc32c_table_driven(const void* data, std::size_t bytes, std::uint32_t crc = 0);
// As 8 lowercase hex digits, the spelling checkpoints record.
std::string crc32c_hex(const Tensor& host_tensor);
// The index of the first NaN or infinite value of a floating-point host tensor (F32, F64, F16,
// BF16), or -1 when all are finite or the dtype is an integer one.
std::int64_t first_non_finite(const Tensor& host_tensor);

}  // namespace skew
