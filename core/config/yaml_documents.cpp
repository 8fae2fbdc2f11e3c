#include "core/config/yaml_documents.h"

#include <yaml-cpp/eventhandler.h>

#include <sstream>
#include <vector>

namespace mok {
namespace {

// Records where each document starts (its first token, `---` when it has one) and where its
// first node is; ignores everything else.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;
  std::vector<YAML::Mark> first_nodes;

  void OnDocumentStart(const YAML::Mark& mark) override {
    starts.push_back(mark);
    first_nodes.push_back(mark);
    node_seen_ = false;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override {
    node(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node(mark);
  }
  void OnMapEnd() override {}

 private:
  void node(const YAML::Mark& mark) {
    if (!node_seen_ && !first_nodes.empty()) first_nodes.back() = mark;
    node_seen_ = true;
  }
  bool node_seen_ = false;
};

// The whole UTF-8 character at byte `pos` (the text was checked to be UTF-8 before).
std::string character_at(const std::string& text, int pos) {
  if (pos < 0 || static_cast<size_t>(pos) >= text.size()) return "end of text";
  size_t end = static_cast<size_t>(pos) + 1;
  while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
  return "'" + text.substr(static_cast<size_t>(pos), end - static_cast<size_t>(pos)) + "'";
}

}  // namespace

YamlDocuments load_yaml_documents(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts documents;
  while (parser.HandleNextDocument(documents)) {
    const std::vector<YAML::Mark>& s = documents.starts;
    if (s.size() >= 2 && s[s.size() - 1].pos == s[s.size() - 2].pos)
      throw YAML::ParserException(s.back(), "unexpected " + character_at(text, s.back().pos));
  }
  YamlDocuments out;
  out.count = documents.starts.size();
  if (out.count > 0) out.first = YAML::Load(text);
  if (out.count > 1) out.second_start = documents.first_nodes[1];
  return out;
}

}  // namespace mok
