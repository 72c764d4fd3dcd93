// The model's one-kernel decode step (rung 3 of the step ladder): launcher and supports, for the
// variant table (variants.cpp). Rungs 1 and 2 are chains the op composes (chained_steps()).
#pragma once
#include <string>

#include "kernels/model/model.hpp"

namespace attnbench::model_step_impl {

std::string supports(const DecodeStepParams& p, const DeviceCaps& caps);  // 3_persistent.cu
void persistent(const DecodeStepParams& p, const LaunchContext& ctx);     // 3_persistent.cu

}  // namespace attnbench::model_step_impl
