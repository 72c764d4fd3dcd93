// The made-up card the report tests derive rates against: round ceilings, so that every
// expected rate and floor can be worked out by hand.
#pragma once
#include "app/device.hpp"

namespace attnbench {

inline Ceilings test_card() {
  Ceilings c;
  c.copy_gbps = 3000;
  c.read_gbps = 3300;
  c.fp32_tflops = 50;
  c.fp16_tflops = 700;
  c.bf16_tflops = 700;
  return c;
}

}  // namespace attnbench
