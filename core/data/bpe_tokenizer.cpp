#include "core/data/bpe_tokenizer.h"

#include <algorithm>
#include <queue>
#include <string>

namespace mok {

namespace {

enum class ByteClass { space, letter, digit, other };

ByteClass classify(unsigned char c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') return ByteClass::space;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return ByteClass::letter;
  if (c >= '0' && c <= '9') return ByteClass::digit;
  return ByteClass::other;
}

inline uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}
inline int32_t key_left(uint64_t k) { return static_cast<int32_t>(k >> 32); }
inline int32_t key_right(uint64_t k) { return static_cast<int32_t>(k & 0xffffffffu); }

// Merges every occurrence of (a,b) in `syms`, left to right, into m. Returns true if any.
bool merge_pair(std::vector<int32_t>& syms, int32_t a, int32_t b, int32_t m) {
  size_t w = 0;
  bool any = false;
  for (size_t r = 0; r < syms.size(); ++r) {
    if (r + 1 < syms.size() && syms[r] == a && syms[r + 1] == b) {
      syms[w++] = m;
      ++r;
      any = true;
    } else {
      syms[w++] = syms[r];
    }
  }
  syms.resize(w);
  return any;
}

// A candidate in the merge queue; the queue's top is the highest count, then the smallest
// (left, right). Entries go stale when counts change and are checked when popped.
struct Candidate {
  int64_t count;
  uint64_t key;
  bool operator<(const Candidate& o) const {
    if (count != o.count) return count < o.count;
    return key > o.key;  // key order = (left, right) order
  }
};

}  // namespace

void bpe_pieces(std::string_view text, const std::function<void(std::string_view)>& fn) {
  const size_t n = text.size();
  auto emit = [&](size_t b, size_t e) {
    while (e - b > kBpeMaxPieceBytes) {
      fn(text.substr(b, kBpeMaxPieceBytes));
      b += kBpeMaxPieceBytes;
    }
    if (e > b) fn(text.substr(b, e - b));
  };
  size_t i = 0;
  while (i < n) {
    const ByteClass c = classify(static_cast<unsigned char>(text[i]));
    size_t j = i + 1;
    while (j < n && classify(static_cast<unsigned char>(text[j])) == c) ++j;
    if (c == ByteClass::space) {
      // Leave a final ' ' to the word that follows.
      if (j < n && text[j - 1] == ' ') {
        emit(i, j - 1);
        i = j - 1;
        const ByteClass wc = classify(static_cast<unsigned char>(text[j]));
        size_t k = j + 1;
        while (k < n && classify(static_cast<unsigned char>(text[k])) == wc) ++k;
        emit(i, k);
        i = k;
        continue;
      }
    }
    emit(i, j);
    i = j;
  }
}

BpeTokenizer BpeTokenizer::train(const std::vector<std::string_view>& texts, int vocab_size,
                                 const Progress& progress) {
  if (vocab_size < 256 || vocab_size > (1 << 20)) {
    throw TokenizerError("BPE vocab_size must lie in [256, 1048576] (got " + std::to_string(vocab_size) + ")");
  }
  const int wanted = vocab_size - 256;

  // Distinct pieces and their counts, in sorted order so that everything below is fixed.
  std::unordered_map<std::string_view, int64_t> piece_count;
  for (std::string_view t : texts) bpe_pieces(t, [&](std::string_view p) { ++piece_count[p]; });
  std::vector<std::pair<std::string_view, int64_t>> pieces(piece_count.begin(), piece_count.end());
  piece_count.clear();
  std::sort(pieces.begin(), pieces.end());

  std::vector<std::vector<int32_t>> words(pieces.size());
  std::vector<int64_t> counts(pieces.size());
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;  // pair → words that may hold it
  for (size_t w = 0; w < pieces.size(); ++w) {
    counts[w] = pieces[w].second;
    auto& syms = words[w];
    for (unsigned char c : pieces[w].first) syms.push_back(c);
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      const uint64_t k = pair_key(syms[i], syms[i + 1]);
      pair_count[k] += counts[w];
      auto& list = where[k];
      if (list.empty() || list.back() != static_cast<int32_t>(w)) list.push_back(static_cast<int32_t>(w));
    }
  }
  std::priority_queue<Candidate> queue;
  for (const auto& [k, c] : pair_count) queue.push({c, k});

  std::vector<Merge> merges;
  merges.reserve(wanted);
  std::unordered_map<uint64_t, int64_t> delta;
  std::vector<uint64_t> touched;  // keys of `delta` in first-touch order
  while (static_cast<int>(merges.size()) < wanted && !queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    auto it = pair_count.find(top.key);
    const int64_t current = it == pair_count.end() ? 0 : it->second;
    if (current != top.count) {
      // Stale: a higher stale entry stands for a count that has since dropped.
      if (current > 0 && current < top.count) queue.push({current, top.key});
      continue;
    }
    if (current <= 0) continue;

    const int32_t a = key_left(top.key), b = key_right(top.key);
    const int32_t m = 256 + static_cast<int32_t>(merges.size());
    merges.push_back({a, b});

    std::vector<int32_t> holders = std::move(where[top.key]);
    where.erase(top.key);
    auto add = [&](uint64_t k, int64_t d) {
      auto [pos, inserted] = delta.try_emplace(k, 0);
      if (inserted) touched.push_back(k);
      pos->second += d;
    };
    for (int32_t w : holders) {
      auto& syms = words[w];
      const int64_t c = counts[w];
      // Cheap presence check before the rewrite.
      bool present = false;
      for (size_t i = 0; i + 1 < syms.size() && !present; ++i) present = syms[i] == a && syms[i + 1] == b;
      if (!present) continue;
      for (size_t i = 0; i + 1 < syms.size(); ++i) add(pair_key(syms[i], syms[i + 1]), -c);
      merge_pair(syms, a, b, m);
      for (size_t i = 0; i + 1 < syms.size(); ++i) {
        const uint64_t k = pair_key(syms[i], syms[i + 1]);
        add(k, c);
        if (syms[i] == m || syms[i + 1] == m) {
          auto& list = where[k];
          if (list.empty() || list.back() != w) list.push_back(w);
        }
      }
    }
    for (uint64_t k : touched) {
      const int64_t d = delta[k];
      if (d == 0) continue;
      int64_t& pc = pair_count[k];
      pc += d;
      if (d > 0) queue.push({pc, k});
      if (pc == 0) pair_count.erase(k);
    }
    delta.clear();
    touched.clear();
    if (progress) progress(static_cast<int>(merges.size()), wanted);
  }
  return BpeTokenizer(std::move(merges));
}

BpeTokenizer::BpeTokenizer(std::vector<Merge> merges) : merges_(std::move(merges)) {
  bytes_.resize(256 + merges_.size());
  for (int i = 0; i < 256; ++i) bytes_[i] = std::string(1, static_cast<char>(i));
  rank_.reserve(merges_.size() * 2);
  for (size_t k = 0; k < merges_.size(); ++k) {
    const int32_t id = 256 + static_cast<int32_t>(k);
    const auto [a, b] = merges_[k];
    if (a < 0 || b < 0 || a >= id || b >= id) {
      throw TokenizerError("BPE merge " + std::to_string(k) + " (" + std::to_string(a) + " " + std::to_string(b) +
                           ") refers to an id not defined before it");
    }
    if (!rank_.emplace(pair_key(a, b), static_cast<int32_t>(k)).second) {
      throw TokenizerError("BPE merge " + std::to_string(k) + " repeats an earlier pair");
    }
    // Merges never cross a piece, so no real token is longer than one; a file that says
    // otherwise (each merge doubling the last) would otherwise build tokens of 2^k bytes.
    if (bytes_[a].size() + bytes_[b].size() > kBpeMaxPieceBytes) {
      throw TokenizerError("BPE merge " + std::to_string(k) + " (" + std::to_string(a) + " " + std::to_string(b) +
                           ") makes a token of " + std::to_string(bytes_[a].size() + bytes_[b].size()) +
                           " bytes, longer than any piece (" + std::to_string(kBpeMaxPieceBytes) + ")");
    }
    bytes_[id] = bytes_[a] + bytes_[b];
  }
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  std::vector<int32_t> syms(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) syms[i] = static_cast<unsigned char>(piece[i]);
  while (syms.size() >= 2) {
    int32_t best = -1;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      auto it = rank_.find(pair_key(syms[i], syms[i + 1]));
      if (it != rank_.end() && (best < 0 || it->second < best)) best = it->second;
    }
    if (best < 0) break;
    merge_pair(syms, merges_[best].left, merges_[best].right, 256 + best);
  }
  out.insert(out.end(), syms.begin(), syms.end());
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 16);
  // Per-call cache: pieces repeat a lot in natural text (Zipf), so most are looked up.
  std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> cache;  // piece → (offset in out, length)
  bpe_pieces(text, [&](std::string_view p) {
    auto it = cache.find(p);
    if (it != cache.end()) {
      const auto [off, len] = it->second;
      for (uint32_t k = 0; k < len; ++k) {
        const int32_t id = out[off + k];  // copy first: push_back may reallocate
        out.push_back(id);
      }
      return;
    }
    const size_t off = out.size();
    encode_piece(p, out);
    if (off <= UINT32_MAX) cache.emplace(p, std::pair<uint32_t, uint32_t>(off, static_cast<uint32_t>(out.size() - off)));
  });
  return out;
}

const std::string& BpeTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw TokenizerError("token id " + std::to_string(id) + " is outside the vocabulary (size " +
                         std::to_string(vocab_size()) + ")");
  }
  return bytes_[id];
}

std::string BpeTokenizer::to_text() const {
  std::string s = "mok-tokenizer 1\ntype bpe\npretokenizer ws-class-1\nvocab_size " + std::to_string(vocab_size()) +
                  "\nmerges " + std::to_string(merges_.size()) + "\n";
  for (const auto& m : merges_) s += std::to_string(m.left) + " " + std::to_string(m.right) + "\n";
  s += "end\n";
  return s;
}

}  // namespace mok
