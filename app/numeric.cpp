#include "app/numeric.hpp"

namespace attnbench {

void encode_range(DType t, const float* values, int64_t n, uint8_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    switch (t) {
      case DType::fp32: std::memcpy(&out[4 * i], &values[i], 4); break;
      case DType::fp16: {
        const uint16_t h = float_to_half(values[i]);
        std::memcpy(&out[2 * i], &h, 2);
        break;
      }
      case DType::bf16: {
        const uint16_t h = float_to_bf16(values[i]);
        std::memcpy(&out[2 * i], &h, 2);
        break;
      }
      case DType::fp8_e4m3: out[i] = float_to_fp8e4m3(values[i]); break;
    }
  }
}

std::vector<uint8_t> encode(DType t, const std::vector<float>& values) {
  std::vector<uint8_t> out(values.size() * dtype_bytes(t));
  encode_range(t, values.data(), static_cast<int64_t>(values.size()), out.data());
  return out;
}

// One loop per dtype, so that the per-element work is the conversion alone.
void decode_range(DType t, const uint8_t* bytes, int64_t n, float* out) {
  switch (t) {
    case DType::fp32: std::memcpy(out, bytes, static_cast<std::size_t>(n) * 4); return;
    case DType::fp16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        out[i] = half_to_float(h);
      }
      return;
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        out[i] = bf16_to_float(h);
      }
      return;
    case DType::fp8_e4m3:
      for (int64_t i = 0; i < n; ++i) out[i] = fp8e4m3_to_float(bytes[i]);
      return;
  }
}

double decode_element(DType t, const uint8_t* bytes, int64_t i) {
  switch (t) {
    case DType::fp32: {
      float f;
      std::memcpy(&f, bytes + 4 * i, 4);
      return f;
    }
    case DType::fp16: {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      return half_to_float(h);
    }
    case DType::bf16: {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      return bf16_to_float(h);
    }
    case DType::fp8_e4m3: return fp8e4m3_to_float(bytes[i]);
  }
  return 0;
}

}  // namespace attnbench
