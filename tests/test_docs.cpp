// docs/cases.md documents every op's keys: the same ops, the same keys in the same
// order, and "required" exactly where the registry has no default. The registry is the
// source of truth; this test keeps the user's reference from drifting from it.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "app/op.hpp"

using namespace attnbench;

namespace {

struct DocKey {
  std::string name, fallback;
};

// "## op `NAME`" sections and the first column of their key tables.
std::map<std::string, std::vector<DocKey>> documented_ops() {
  std::ifstream in(std::string(ATTNBENCH_SOURCE_DIR) + "/docs/cases.md");
  EXPECT_TRUE(in.good()) << "docs/cases.md is missing";
  const std::regex section(R"(^## op `([a-z_0-9]+)`)"), row(R"(^\| `([a-z_0-9]+)` \|[^|]*\| ([^|]*) \|)");
  std::map<std::string, std::vector<DocKey>> ops_in_doc;
  std::string line, current;
  while (std::getline(in, line)) {
    std::smatch m;
    if (line.rfind("## ", 0) == 0) current = std::regex_search(line, m, section) ? m[1].str() : "";
    if (std::regex_search(line, m, section)) ops_in_doc[current];
    if (!current.empty() && std::regex_search(line, m, row)) ops_in_doc[current].push_back({m[1], m[2]});
  }
  return ops_in_doc;
}

}  // namespace

TEST(Docs, CasesMdListsEveryOpAndKey) {
  const auto documented = documented_ops();
  for (const OpSpec& op : ops()) {
    const auto it = documented.find(op.name);
    ASSERT_NE(it, documented.end()) << "docs/cases.md has no section \"## op `" << op.name << "`\"";
    std::vector<std::string> want, got;
    for (const KeySpec& k : op.keys) want.push_back(k.name);
    for (const DocKey& k : it->second) got.push_back(k.name);
    EXPECT_EQ(got, want) << "docs/cases.md keys of op " << op.name;
    for (const DocKey& d : it->second) {
      const KeySpec* k = op.key(d.name);
      if (k) EXPECT_EQ(d.fallback == "required", k->required()) << op.name << "." << d.name << ": " << d.fallback;
    }
  }
  for (const auto& [name, keys] : documented) EXPECT_NE(find_op(name), nullptr) << "docs/cases.md documents op " << name;
}
