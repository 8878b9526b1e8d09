#include "base/file_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace ponder {
namespace {

TEST(Checksum64, IsTheSameForAnyThreadCountAndSeesOneBit) {
  std::vector<uint8_t> data(3 * (1 << 20) + 12345);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  ThreadPool pool(2);
  const uint64_t a = checksum64(data.data(), static_cast<int64_t>(data.size()), nullptr);
  EXPECT_EQ(a, checksum64(data.data(), static_cast<int64_t>(data.size()), &pool));
  data[2 * (1 << 20) + 7] ^= 1;
  EXPECT_NE(a, checksum64(data.data(), static_cast<int64_t>(data.size()), nullptr));
}

TEST(WriteFileAtomically, WritesHeadAndBodyAndLeavesNoTemporary) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ponder-fileio-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "f.bin").string();
  const std::vector<uint8_t> head = {1, 2, 3}, body = {4, 5, 6, 7};
  ASSERT_TRUE(write_file_atomically(path, head.data(), 3, body.data(), 4));
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> got{std::istreambuf_iterator<char>(in), {}};
  EXPECT_EQ(got, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);
  const int fd = ::open(path.c_str(), O_RDONLY);
  uint8_t two[2];
  EXPECT_TRUE(pread_all(fd, two, 2, 5));
  EXPECT_EQ(two[0], 6);
  EXPECT_FALSE(pread_all(fd, two, 2, 6)) << "past the end of the file";
  ::close(fd);
  // A directory that does not exist: false, nothing written.
  EXPECT_FALSE(
      write_file_atomically((dir / "no" / "f.bin").string(), head.data(), 3, body.data(), 4));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ponder
