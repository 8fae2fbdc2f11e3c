#include "core/train/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/backend/exec_context.h"
#include "core/train/adamw.h"
#include "core/train/safetensors.h"
#include "core/util/json_reader.h"
#include "core/util/json_writer.h"
#include "core/util/replace_file.h"

namespace mok {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat1 = "mok-checkpoint-1";  // no file checksums
constexpr const char* kFormat2 = "mok-checkpoint-2";

[[noreturn]] void fail(const std::string& what) { throw CheckpointError(what); }

// A weight that is NaN or infinite makes every output it touches NaN: generation would print
// arbitrary bytes and a resume would fail at its first step, far from the cause.
void require_finite_weights(const SafeTensorsFile& file, const std::string& name) {
  const SafeTensor& t = file.get(name);
  if (t.dtype != SafeDType::f32) return;  // read_into names the wrong dtype
  const size_t n = t.bytes.size() / sizeof(float);
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, t.bytes.data() + i * sizeof(float), sizeof v);
    bad += std::isfinite(v) ? 0 : 1;
  }
  if (bad > 0) {
    fail(file.path() + ": tensor '" + name + "' holds " + std::to_string(bad) + " of " + std::to_string(n) +
         " values that are not finite (NaN or infinity); these weights cannot be used (restore an earlier "
         "checkpoint)");
  }
}

// A folder's entries to disk, after a rename into it. Best effort: some file systems refuse
// directory descriptors or fsync on them, and the files inside were synced already.
void sync_directory(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void write_text_file(const fs::path& p, const std::string& text) {
  {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    if (!out) fail(p.string() + ": cannot create: " + std::strerror(errno));
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) fail(p.string() + ": write failed");
  }
  // A file whose bytes cannot reach the disk must not be published as a checkpoint.
  if (!sync_file(p.string())) fail(p.string() + ": cannot flush to disk: " + std::strerror(errno));
}

std::string read_text_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail(p.string() + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string temp_sibling(const fs::path& dir, const char* what) {
  std::string name = ".";
  name += dir.filename().string();
  name += '.';
  name += what;
  name += '-';
  name += std::to_string(::getpid());
  return (dir.parent_path() / name).string();
}

std::string state_to_json(const TrainerState& s) {
  JsonWriter j;
  j.begin_object();
  j.key("format").value(kFormat2);
  j.key("step").value(s.step);
  j.key("tokens_seen").value(s.tokens_seen);
  j.key("total_steps").value(s.total_steps);
  j.key("run_id").value(s.run_id);
  j.key("run_name").value(s.run_name);
  j.key("seed").value(std::to_string(s.seed));  // u64 as text: JSON readers lose bits otherwise
  j.key("wall_s").value(s.wall_s);
  j.key("mok_version").value(s.mok_version);
  j.key("counters").begin_object();
  for (const auto& [k, v] : s.counters) j.key(k).value(v);
  j.end_object();
  if (s.branched_from.run_id != 0 || !s.branched_from.checkpoint.empty()) {
    j.key("branched_from").begin_object();
    j.key("run_id").value(s.branched_from.run_id);
    j.key("step").value(s.branched_from.step);
    j.key("checkpoint").value(s.branched_from.checkpoint);
    j.end_object();
  }
  j.key("files").begin_object();
  for (const auto& [name, d] : s.files) {
    j.key(name).begin_object();
    j.key("bytes").value(d.bytes);
    j.key("crc32c").value(d.crc_hex());
    j.end_object();
  }
  j.end_object();
  j.end_object();
  return j.str() + "\n";
}

// ".<name>.<what>-<pid>" → (name, what, pid); false for other names.
bool parse_temp_name(const std::string& entry, std::string* name, std::string* what, long* pid) {
  if (entry.size() < 4 || entry[0] != '.') return false;
  const size_t dash = entry.rfind('-');
  const size_t dot = entry.rfind('.', dash == std::string::npos ? std::string::npos : dash);
  if (dash == std::string::npos || dot == std::string::npos || dot == 0 || dot > dash) return false;
  const std::string digits = entry.substr(dash + 1);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  *name = entry.substr(1, dot - 1);
  *what = entry.substr(dot + 1, dash - dot - 1);
  *pid = std::strtol(digits.c_str(), nullptr, 10);
  return !name->empty() && (*what == "tmp" || *what == "old" || *what == "del");
}

// False only when no process `pid` exists on this host.
bool process_alive(long pid) {
  if (pid <= 0) return false;
  if (pid == static_cast<long>(::getpid())) return true;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH;
}

// "step_000400" → 400; -1 for other names.
int64_t checkpoint_step_of(const std::string& folder) {
  if (folder.rfind("step_", 0) != 0 || folder.size() == 5) return -1;
  const std::string digits = folder.substr(5);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 18) return -1;
  return std::stoll(digits);
}

// The seed as a save writes it: decimal digits only (std::stoull would take "-5" as
// 2^64 - 5 and " 12x" as 12: another seed, so other data than the run's).
uint64_t parse_seed_text(const std::string& text) {
  uint64_t seed = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seed);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || text[0] == '+' || text[0] == '-')
    throw std::runtime_error("seed '" + text + "' is not a non-negative 64-bit integer");
  return seed;
}

FileDigest parse_digest(const JsonValue& j) {
  FileDigest d;
  d.bytes = j.at("bytes").as_int64();
  if (d.bytes < 0) throw std::runtime_error("a file of " + std::to_string(d.bytes) + " bytes");
  const std::string hex = j.at("crc32c").as_string();
  if (hex.size() != 8 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
    throw std::runtime_error("crc32c '" + hex + "' is not 8 hex digits");
  }
  d.crc32c = static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
  return d;
}

}  // namespace

std::string checkpoint_folder_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%06lld", static_cast<long long>(step));
  return buf;
}

StagedCheckpoint stage_checkpoint(const std::string& dir_text, const std::vector<Parameter*>& params,
                                  const AdamW* optimizer, const TrainerState& state_in, const std::string& config_yaml,
                                  const std::function<void(const std::string&)>& write_extra) {
  const fs::path dir = fs::absolute(fs::path(dir_text)).lexically_normal();
  if (state_in.step < 0) fail(dir.string() + ": checkpoint not written: negative step " + std::to_string(state_in.step));
  for (const Parameter* p : params)
    if (!p->has_master())
      fail(dir.string() + ": checkpoint not written: '" + p->name +
           "' has no fp32 master (a forward-only model keeps its bf16 copies alone)");
  std::error_code ec;
  fs::create_directories(dir.parent_path(), ec);
  if (ec) fail(dir.parent_path().string() + ": cannot create folder: " + ec.message());
  clean_stale_checkpoint_temps(dir.parent_path().string());
  const fs::path tmp = temp_sibling(dir, "tmp");
  fs::remove_all(tmp, ec);
  fs::create_directory(tmp, ec);
  if (ec) fail(tmp.string() + ": cannot create folder: " + ec.message());

  try {
    std::vector<SafeTensorView> weights;
    for (const Parameter* p : params) weights.push_back(safe_view(p->name, p->value));
    write_safetensors((tmp / CheckpointFiles::model).string(), weights,
                      {{"format", "mok"}, {"step", std::to_string(state_in.step)}});
    if (optimizer) {
      std::vector<SafeTensorView> opt;
      const auto& ps = optimizer->parameters();
      for (size_t i = 0; i < ps.size(); ++i) {
        opt.push_back(safe_view("m." + ps[i]->name, optimizer->first_moments()[i]));
        opt.push_back(safe_view("v." + ps[i]->name, optimizer->second_moments()[i]));
      }
      const int64_t step = optimizer->step_count();
      opt.push_back(SafeTensorView{"step", SafeDType::i64, {1}, &step, nullptr});
      write_safetensors((tmp / CheckpointFiles::optimizer).string(), opt,
                        {{"optimizer", "adamw"}});
    }
    write_text_file(tmp / CheckpointFiles::config, config_yaml);
    if (write_extra) write_extra(tmp.string());
    // The trainer state last, with the size and checksum of every file written before it
    // (read back from the page cache: what the file system holds, not what was meant).
    TrainerState state = state_in;
    state.files.clear();
    for (const auto& e : fs::directory_iterator(tmp)) {
      if (!e.is_regular_file()) continue;
      const std::string name = e.path().filename().string();
      if (name == CheckpointFiles::state) continue;
      state.files[name] = file_digest(e.path().string());
    }
    write_text_file(tmp / CheckpointFiles::state, state_to_json(state));
    sync_directory(tmp);
  } catch (const std::exception& e) {
    fs::remove_all(tmp, ec);
    if (dynamic_cast<const CheckpointError*>(&e)) throw;
    fail(dir.string() + ": checkpoint not written: " + e.what());
  }
  return {dir.string(), tmp.string()};
}

void publish_checkpoint(const StagedCheckpoint& staged) {
  const fs::path dir(staged.dir), tmp(staged.tmp_dir);
  std::error_code ec;
  try {
    // Into place. An existing folder of the same name is moved aside first and removed only
    // after the new one is in place.
    fs::path old;
    if (fs::exists(dir)) {
      old = temp_sibling(dir, "old");
      fs::remove_all(old, ec);
      fs::rename(dir, old);
    }
    fs::rename(tmp, dir);
    sync_directory(dir.parent_path());
    if (!old.empty()) fs::remove_all(old, ec);
  } catch (const std::exception& e) {
    fs::remove_all(tmp, ec);
    fail(dir.string() + ": checkpoint not written: " + e.what());
  }

  // latest → this folder, replaced whole (its temporary removed if the write fails).
  const fs::path latest = dir.parent_path() / CheckpointFiles::latest;
  try {
    replace_file(latest.string(), dir.filename().string() + "\n");
  } catch (const ReplaceFileError& e) {
    fail(latest.string() + ": cannot update: " + e.reason);
  }
  sync_directory(dir.parent_path());
}

void discard_checkpoint(const StagedCheckpoint& staged) noexcept {
  std::error_code ec;
  fs::remove_all(staged.tmp_dir, ec);
}

void save_checkpoint(const std::string& dir, const std::vector<Parameter*>& params, const AdamW* optimizer,
                     const TrainerState& state, const std::string& config_yaml,
                     const std::function<void(const std::string&)>& write_extra) {
  publish_checkpoint(stage_checkpoint(dir, params, optimizer, state, config_yaml, write_extra));
}

void remove_checkpoint(const std::string& dir_text) {
  const fs::path dir = fs::absolute(fs::path(dir_text)).lexically_normal();
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  const fs::path doomed = temp_sibling(dir, "del");
  fs::remove_all(doomed, ec);
  fs::rename(dir, doomed, ec);
  if (ec) fail(dir.string() + ": cannot remove: " + ec.message());
  sync_directory(dir.parent_path());
  fs::remove_all(doomed, ec);
}

std::vector<std::string> clean_stale_checkpoint_temps(const std::string& run_dir) {
  std::vector<std::string> done;
  std::error_code ec;
  fs::directory_iterator it(run_dir, ec);
  if (ec) return done;
  std::vector<fs::path> entries;
  for (const auto& e : it) entries.push_back(e.path());
  for (const fs::path& p : entries) {
    std::string name, what;
    long pid = 0;
    if (!parse_temp_name(p.filename().string(), &name, &what, &pid) || process_alive(pid)) continue;
    const fs::path original = p.parent_path() / name;
    if (what == "old" && !fs::exists(original, ec)) {
      // A replacing save died between moving the old folder aside and renaming the new one
      // in: put the old one back.
      fs::rename(p, original, ec);
      if (!ec) done.push_back("restored " + original.string());
      continue;
    }
    if (fs::remove_all(p, ec) > 0 && !ec) done.push_back("removed " + p.string());
  }
  return done;
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& run_dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  fs::directory_iterator it(run_dir, ec);
  if (ec) return out;
  for (const auto& e : it) {
    const int64_t step = checkpoint_step_of(e.path().filename().string());
    if (step < 0 || !fs::exists(e.path() / CheckpointFiles::state, ec)) continue;
    out.emplace_back(step, e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string resolve_checkpoint_dir(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  if (!fs::is_directory(p, ec)) fail(path + ": no such checkpoint folder");
  if (fs::exists(p / CheckpointFiles::state)) return p.string();
  // A run folder: its newest checkpoint. (A save that died after renaming its folder into
  // place but before rewriting `latest` leaves `latest` one behind; the folder decides.)
  const auto checkpoints = list_checkpoints(p.string());
  if (!checkpoints.empty()) return checkpoints.back().second;
  if (fs::exists(p / CheckpointFiles::latest)) {
    std::string name = read_text_file(p / CheckpointFiles::latest);
    while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
    fail(path + ": 'latest' names '" + name + "', which is not a complete checkpoint");
  }
  fail(path + ": not a checkpoint folder (no " + CheckpointFiles::state + ") nor a run folder (no step_N " +
       "checkpoint folders)");
}

TrainerState read_trainer_state(const std::string& dir) {
  const fs::path p = fs::path(dir) / CheckpointFiles::state;
  return parse_trainer_state(read_text_file(p), p.string());
}

TrainerState parse_trainer_state(std::string_view text, const std::string& file) {
  const fs::path p(file);
  TrainerState s;
  try {
    const JsonValue j = parse_json(text);
    const std::string format = j.at("format").as_string();
    if (format != kFormat1 && format != kFormat2) throw std::runtime_error("unknown format '" + format + "'");
    s.step = j.at("step").as_int64();
    s.tokens_seen = j.at("tokens_seen").as_int64();
    s.total_steps = j.at("total_steps").as_int64();
    s.run_id = j.at("run_id").as_int64();
    s.run_name = j.at("run_name").as_string();
    s.seed = parse_seed_text(j.at("seed").as_string());
    s.wall_s = j.at("wall_s").as_double();
    s.mok_version = j.at("mok_version").as_string();
    for (const auto& [k, v] : j.at("counters").as_object()) s.counters[k] = v.as_int64();
    if (const JsonValue* b = j.find("branched_from")) {
      s.branched_from.run_id = b->at("run_id").as_int64();
      s.branched_from.step = b->at("step").as_int64();
      s.branched_from.checkpoint = b->at("checkpoint").as_string();
    }
    if (format == kFormat2) {
      for (const auto& [name, d] : j.at("files").as_object()) s.files[name] = parse_digest(d);
    }
  } catch (const std::exception& e) {
    fail(p.string() + ": bad trainer state: " + e.what());
  }
  // Values no save writes: an edited or damaged file.
  if (s.step < 0) fail(p.string() + ": bad trainer state: step " + std::to_string(s.step) + " is negative");
  if (s.tokens_seen < 0 || s.total_steps < 0 || s.wall_s < 0 || !std::isfinite(s.wall_s)) {
    fail(p.string() + ": bad trainer state: negative tokens_seen or total_steps, or a wall_s that is negative or "
         "not finite");
  }
  if (auto it = s.counters.find("data.next_step"); it != s.counters.end() && it->second != s.step) {
    fail(p.string() + ": bad trainer state: step " + std::to_string(s.step) + " but counters.data.next_step " +
         std::to_string(it->second) + " (the file was edited or damaged)");
  }
  return s;
}

std::string read_checkpoint_config(const std::string& dir) {
  verify_checkpoint_file(dir, CheckpointFiles::config);
  return read_text_file(fs::path(dir) / CheckpointFiles::config);
}

void verify_checkpoint_file(const std::string& dir, const std::string& file) {
  const TrainerState s = read_trainer_state(dir);
  const fs::path p = fs::path(dir) / file;
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) fail(p.string() + ": missing from the checkpoint");
  if (s.files.empty()) return;  // format 1: nothing recorded
  const auto it = s.files.find(file);
  if (it == s.files.end()) fail(p.string() + ": not one of the files the checkpoint was written with");
  FileDigest now;
  try {
    now = file_digest(p.string());
  } catch (const std::exception& e) {
    fail(e.what());
  }
  if (now != it->second) {
    fail(p.string() + ": damaged: " + std::to_string(now.bytes) + " bytes with CRC-32C " + now.crc_hex() +
         ", written as " + std::to_string(it->second.bytes) + " bytes with " + it->second.crc_hex() +
         " (a disk or copy error, or an edit); use another checkpoint");
  }
}

void verify_checkpoint(const std::string& dir) {
  const TrainerState s = read_trainer_state(dir);
  if (s.files.empty()) verify_checkpoint_file(dir, CheckpointFiles::model);
  for (const auto& [name, digest] : s.files) verify_checkpoint_file(dir, name);
}

void load_model_weights(const std::string& dir, const std::vector<Parameter*>& params) {
  load_model_weights(dir, params, params.size());
}

void load_model_weights(const std::string& dir, const std::vector<Parameter*>& params, size_t model_tensors) {
  verify_checkpoint_file(dir, CheckpointFiles::model);
  const SafeTensorsFile file = SafeTensorsFile::read((fs::path(dir) / CheckpointFiles::model).string());
  for (Parameter* p : params) {
    require_finite_weights(file, p->name);
    if (p->has_master()) {
      file.read_into(p->name, p->value);
    } else {
      // A compute copy alone (a forward-only model on a GPU): the file's values pass through
      // a `real` buffer and are converted, as a master's would be.
      Tensor staging = ExecContext::current().empty(p->shape(), kRealDType);
      file.read_into(p->name, staging);
      ExecContext::current().ops().convert(staging, p->compute_copy);
    }
  }
  if (file.tensors().size() != model_tensors) {
    fail(file.path() + ": holds " + std::to_string(file.tensors().size()) +
         " tensors, the model has " + std::to_string(model_tensors) +
         " parameters (different model config?)");
  }
}

void load_optimizer_state(const std::string& dir, AdamW& optimizer) {
  verify_checkpoint_file(dir, CheckpointFiles::optimizer);
  const SafeTensorsFile file =
      SafeTensorsFile::read((fs::path(dir) / CheckpointFiles::optimizer).string());
  const auto& ps = optimizer.parameters();
  for (size_t i = 0; i < ps.size(); ++i) {
    file.read_into("m." + ps[i]->name, optimizer.first_moments()[i]);
    file.read_into("v." + ps[i]->name, optimizer.second_moments()[i]);
  }
  const std::vector<int64_t> step = file.read_i64("step");
  if (step.size() != 1) fail(file.path() + ": 'step' must hold one value");
  optimizer.set_step_count(step[0]);
}

}  // namespace mok
