#pragma once
// Reading the YAML documents of a config's text, safely. yaml-cpp 0.7's YAML::LoadAll
// (Debian 12's) loops forever on some malformed text — a stray ',' at the start of a
// document, `, data: {x: y: 1}` — adding an empty document per turn until memory runs out
// (fixed upstream in jbeder/yaml-cpp#1318/#1319). Here the documents are counted first with
// a parser that stops when a document starts where the previous one did (no input
// consumed), which becomes a syntax error at that place; then only the first is built.

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>

namespace mok {

struct YamlDocuments {
  YAML::Node first;         // the first document (null when there is none)
  size_t count = 0;         // documents in the text
  YAML::Mark second_start;  // where the second one's first node is, when count > 1
};

// Throws what YAML::LoadAll throws (YAML::ParserException with a mark, YAML::DeepRecursion),
// and a YAML::ParserException "unexpected '…'" where the parser stops making progress.
YamlDocuments load_yaml_documents(const std::string& text);

}  // namespace mok
