// The model's one-kernel decode steps: launcher and supports, for the variant table
// (variants.cpp).
#pragma once
#include <string>

#include "kernels/model/model.hpp"

namespace attnbench::model_step_impl {

std::string supports(const DecodeStepParams& p, const DeviceCaps& caps);  // step_persistent.cu
void persistent(const DecodeStepParams& p, const LaunchContext& ctx);     // step_persistent.cu

}  // namespace attnbench::model_step_impl
