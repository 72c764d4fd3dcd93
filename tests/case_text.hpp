// What the case-loading tests share: a case parsed from TOML text as if it were the file
// cases/t.toml, the one-line message a bad one throws, and a check that a message names each of
// some parts.
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "app/case.hpp"

namespace attnbench::case_text {

inline Case parse(const std::string& text, const std::vector<std::string>& sets = {}) {
  return parse_case(text, "cases/t.toml", sets);
}

// The message parse() throws; every message is one line.
inline std::string error_of(const std::string& text, const std::vector<std::string>& sets = {}) {
  try {
    parse(text, sets);
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  }
  ADD_FAILURE() << "expected an InputError for:\n" << text;
  return "";
}

inline void expect_has(const std::string& msg, std::initializer_list<const char*> parts) {
  for (const char* part : parts) EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
}

}  // namespace attnbench::case_text
