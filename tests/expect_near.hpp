// The reference tests' element check: got against expected, element by element, tol relative to
// max(1, |expected|); NaN never passes. Reports the first mismatch and the count rather than one
// failure per element.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <string>

#include "reference/common.hpp"

namespace attnbench::ref {

inline void expect_near(const Eigen::Ref<const Matrix>& got, const Eigen::Ref<const Matrix>& expected, double tol,
                        const std::string& what = "") {
  ASSERT_EQ(got.rows(), expected.rows()) << what;
  ASSERT_EQ(got.cols(), expected.cols()) << what;
  int64_t mismatches = 0;
  std::ostringstream first;
  for (Eigen::Index i = 0; i < got.rows(); ++i) {
    for (Eigen::Index j = 0; j < got.cols(); ++j) {
      if (std::abs(got(i, j) - expected(i, j)) <= tol * std::max(1.0, std::abs(expected(i, j)))) continue;
      if (mismatches++ == 0) {
        first << std::setprecision(17) << "first at (" << i << ", " << j << "): got " << got(i, j) << ", expected "
              << expected(i, j);
      }
    }
  }
  EXPECT_EQ(mismatches, 0) << what << (what.empty() ? "" : ": ") << first.str();
}

}  // namespace attnbench::ref
