#include "base/status.h"

#include <gtest/gtest.h>

namespace ponder {
namespace {

Expected<int> parse_positive(int x) {
  if (x <= 0) return Status::errorf("expected a positive number, found {}", x);
  return x;
}

Status twice(int x, int* out) {
  PONDER_ASSIGN_OR_RETURN(int v, parse_positive(x));
  *out = 2 * v;
  return Status::ok();
}

TEST(StatusTest, ExpectedCarriesValueOrError) {
  auto good = parse_positive(3);
  ASSERT_TRUE(good.has_value());
  EXPECT_EQ(*good, 3);
  auto bad = parse_positive(-1);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.status().message(), "expected a positive number, found -1");
}

TEST(StatusTest, AssignOrReturnPropagates) {
  int out = 0;
  EXPECT_TRUE(twice(4, &out).is_ok());
  EXPECT_EQ(out, 8);
  Status st = twice(0, &out);
  EXPECT_FALSE(st.is_ok());
  EXPECT_EQ(st.with_context("reading x").message(),
            "reading x: expected a positive number, found 0");
}

}  // namespace
}  // namespace ponder
