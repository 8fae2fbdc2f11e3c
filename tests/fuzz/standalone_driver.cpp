// A main() for the fuzz targets where libFuzzer is not available (GCC builds, CI): it runs
// LLVMFuzzerTestOneInput on every seed file, then on a bounded number of deterministic
// mutations of them. No coverage feedback, so it finds less than libFuzzer in the same
// time; what it gives is a fixed, repeatable check of the seeds and their near neighbours
// in every build.
//
//   fuzz_TARGET [--iterations N] [--seed S] [--max-len BYTES] [--dict FILE] PATH...
//
// PATH: seed files or folders of them (read in name order). --dict: a libFuzzer dictionary
// (lines `"token"`, with \\, \" and \xHH escapes) whose tokens the mutations insert.
// When an input breaks an invariant (abort) or crashes, it is written to
// fuzz-failure-<pid>.bin in the current folder, so `fuzz_TARGET fuzz-failure-<pid>.bin`
// replays it; mutation i of seed S is the same input on every machine.

#include <csignal>
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

// The input being run, for the crash handler (written with async-signal-safe calls only).
const std::string* g_current = nullptr;

extern "C" void save_input_and_die(int sig) {
  if (g_current) {
    char name[64];
    std::snprintf(name, sizeof name, "fuzz-failure-%d.bin", static_cast<int>(::getpid()));
    const int fd = ::open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      const ssize_t n = ::write(fd, g_current->data(), g_current->size());
      (void)n;
      ::close(fd);
      static const char kNote[] = "the failing input is in fuzz-failure-<pid>.bin\n";
      const ssize_t m = ::write(STDERR_FILENO, kNote, sizeof kNote - 1);
      (void)m;
    }
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// One libFuzzer dictionary line: name="token" or "token"; "" when it holds none.
std::string dict_token(const std::string& line) {
  const size_t open = line.find('"');
  const size_t close = line.rfind('"');
  if (line.empty() || line[0] == '#' || open == std::string::npos || close <= open) return {};
  std::string out;
  for (size_t i = open + 1; i < close; ++i) {
    if (line[i] != '\\' || i + 1 >= close) {
      out += line[i];
    } else if (line[i + 1] == 'x' && i + 3 < close) {
      out += static_cast<char>(std::stoi(line.substr(i + 2, 2), nullptr, 16));
      i += 3;
    } else {
      out += line[++i];
    }
  }
  return out;
}

// Draws from a 64-bit Mersenne Twister by modulo (the standard distributions may differ
// between library versions; this does not).
class Draw {
 public:
  explicit Draw(uint64_t seed) : rng_(seed) {}
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }
  bool chance(int percent) { return below(100) < static_cast<size_t>(percent); }

 private:
  std::mt19937_64 rng_;
};

const char* const kInterestingNumbers[] = {"0", "-1", "1", "2147483647", "2147483648", "-2147483649",
                                           "4294967296", "9223372036854775807", "18446744073709551616",
                                           "1e308", "1e-320", "-0", "0x10", "nan", ".inf", "1.5", "00"};

std::string mutate(std::string s, const std::vector<std::string>& seeds, const std::vector<std::string>& dict,
                   size_t max_len, Draw& draw) {
  const int edits = 1 + static_cast<int>(draw.below(6));
  for (int e = 0; e < edits; ++e) {
    const size_t at = draw.below(s.size() + 1);
    switch (draw.below(10)) {
      case 0:  // flip one bit
        if (!s.empty()) s[draw.below(s.size())] ^= static_cast<char>(1u << draw.below(8));
        break;
      case 1:  // any byte
        if (!s.empty()) s[draw.below(s.size())] = static_cast<char>(draw.below(256));
        break;
      case 2:  // insert a byte, often a printable or structural one
        s.insert(at, 1, draw.chance(50) ? "\n :{}[],'\"-#&*!|>?"[draw.below(19)] : static_cast<char>(draw.below(256)));
        break;
      case 3: {  // delete a range
        const size_t n = std::min(s.size() - std::min(at, s.size()), 1 + draw.below(16));
        s.erase(std::min(at, s.size()), n);
        break;
      }
      case 4: {  // duplicate a range in place
        if (s.empty()) break;
        const size_t from = draw.below(s.size());
        const std::string piece = s.substr(from, 1 + draw.below(32));
        s.insert(at, piece);
        break;
      }
      case 5:
      case 6:  // a dictionary token
        if (!dict.empty()) s.insert(at, dict[draw.below(dict.size())]);
        break;
      case 7: {  // replace a run of digits (or insert) with a boundary number
        size_t b = at;
        while (b < s.size() && std::isdigit(static_cast<unsigned char>(s[b]))) ++b;
        s.replace(at, b - at, kInterestingNumbers[draw.below(std::size(kInterestingNumbers))]);
        break;
      }
      case 8: {  // splice: this input's head with another seed's tail
        const std::string& other = seeds[draw.below(seeds.size())];
        s = s.substr(0, at) + other.substr(draw.below(other.size() + 1));
        break;
      }
      case 9: {  // swap two lines
        std::vector<std::string> lines;
        std::istringstream in(s);
        for (std::string l; std::getline(in, l);) lines.push_back(l);
        if (lines.size() < 2) break;
        std::swap(lines[draw.below(lines.size())], lines[draw.below(lines.size())]);
        s.clear();
        for (const std::string& l : lines) s += l + "\n";
        break;
      }
    }
  }
  if (s.size() > max_len) s.resize(max_len);
  return s;
}

int usage() {
  std::fprintf(stderr, "usage: fuzz_TARGET [--iterations N] [--seed S] [--max-len BYTES] [--dict FILE] PATH...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  long iterations = 0;
  uint64_t seed = 1;
  size_t max_len = 4096;
  std::vector<std::string> dict;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--iterations" && has_value) {
      iterations = std::atol(argv[++i]);
    } else if (arg == "--seed" && has_value) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--max-len" && has_value) {
      max_len = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--dict" && has_value) {
      std::ifstream in(argv[++i]);
      if (!in) return std::fprintf(stderr, "cannot read dictionary %s\n", argv[i]), 2;
      for (std::string line; std::getline(in, line);)
        if (std::string t = dict_token(line); !t.empty()) dict.push_back(t);
    } else if (!arg.empty() && arg[0] == '-') {
      return usage();
    } else if (fs::is_directory(arg)) {
      std::vector<fs::path> found;
      for (const auto& e : fs::directory_iterator(arg))
        if (e.is_regular_file()) found.push_back(e.path());
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(arg)) {
      files.emplace_back(arg);
    } else {
      std::fprintf(stderr, "no such seed file or folder: %s\n", arg.c_str());
      return 2;
    }
  }
  if (files.empty()) return usage();

  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, save_input_and_die);
  // An exception no target expects ends here: report it as libFuzzer would (a crash).
  std::set_terminate([] {
    std::fprintf(stderr, "fuzz target threw an uncaught exception\n");
    if (auto e = std::current_exception()) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        std::fprintf(stderr, "  %s\n", x.what());
      } catch (...) {
      }
    }
    std::abort();
  });

  std::vector<std::string> seeds;
  for (const fs::path& f : files) seeds.push_back(read_file(f));
  for (size_t i = 0; i < seeds.size(); ++i) {
    g_current = &seeds[i];
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(seeds[i].data()), seeds[i].size());
  }
  std::printf("replayed %zu seed inputs\n", seeds.size());

  Draw draw(seed);
  std::string input;
  g_current = &input;
  for (long it = 0; it < iterations; ++it) {
    input = mutate(seeds[draw.below(seeds.size())], seeds, dict, max_len, draw);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  }
  std::printf("ran %ld mutated inputs (seed %llu)\n", iterations, static_cast<unsigned long long>(seed));
  return 0;
}
