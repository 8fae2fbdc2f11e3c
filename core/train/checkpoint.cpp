#include "core/train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/train/adamw.h"
#include "core/train/safetensors.h"
#include "core/util/json_reader.h"
#include "core/util/json_writer.h"

namespace mok {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& what) { throw CheckpointError(what); }

void fsync_path(const fs::path& p, bool directory) {
  const int fd = ::open(p.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return;  // best effort (some filesystems refuse directory fds)
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
  fsync_path(p, false);
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
  j.key("format").value("mok-checkpoint-1");
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
  j.end_object();
  return j.str() + "\n";
}

}  // namespace

std::string checkpoint_folder_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%06lld", static_cast<long long>(step));
  return buf;
}

void save_checkpoint(const std::string& dir_text, const std::vector<Parameter*>& params,
                     const AdamW* optimizer, const TrainerState& state,
                     const std::string& config_yaml,
                     const std::function<void(const std::string&)>& write_extra) {
  const fs::path dir = fs::absolute(fs::path(dir_text)).lexically_normal();
  std::error_code ec;
  fs::create_directories(dir.parent_path(), ec);
  if (ec) fail(dir.parent_path().string() + ": cannot create folder: " + ec.message());
  const fs::path tmp = temp_sibling(dir, "tmp");
  fs::remove_all(tmp, ec);
  fs::create_directory(tmp, ec);
  if (ec) fail(tmp.string() + ": cannot create folder: " + ec.message());

  try {
    std::vector<SafeTensorView> weights;
    for (const Parameter* p : params) weights.push_back(safe_view(p->name, p->value));
    write_safetensors((tmp / CheckpointFiles::model).string(), weights,
                      {{"format", "mok"}, {"step", std::to_string(state.step)}});
    if (optimizer) {
      std::vector<SafeTensorView> opt;
      const auto& ps = optimizer->parameters();
      for (size_t i = 0; i < ps.size(); ++i) {
        opt.push_back(safe_view("m." + ps[i]->name, optimizer->first_moments()[i]));
        opt.push_back(safe_view("v." + ps[i]->name, optimizer->second_moments()[i]));
      }
      const int64_t step = optimizer->step_count();
      opt.push_back(SafeTensorView{"step", SafeDType::i64, {1}, &step});
      write_safetensors((tmp / CheckpointFiles::optimizer).string(), opt,
                        {{"optimizer", "adamw"}});
    }
    write_text_file(tmp / CheckpointFiles::state, state_to_json(state));
    write_text_file(tmp / CheckpointFiles::config, config_yaml);
    if (write_extra) write_extra(tmp.string());
    fsync_path(tmp, true);

    // Into place. An existing folder of the same name is moved aside first and removed only
    // after the new one is in place.
    fs::path old;
    if (fs::exists(dir)) {
      old = temp_sibling(dir, "old");
      fs::remove_all(old, ec);
      fs::rename(dir, old);
    }
    fs::rename(tmp, dir);
    fsync_path(dir.parent_path(), true);
    if (!old.empty()) fs::remove_all(old, ec);
  } catch (const std::exception& e) {
    fs::remove_all(tmp, ec);
    if (dynamic_cast<const CheckpointError*>(&e)) throw;
    fail(dir.string() + ": checkpoint not written: " + e.what());
  }

  // latest → this folder (write a temp file, rename over).
  const fs::path latest = dir.parent_path() / CheckpointFiles::latest;
  const fs::path latest_tmp = temp_sibling(latest, "tmp");
  write_text_file(latest_tmp, dir.filename().string() + "\n");
  fs::rename(latest_tmp, latest, ec);
  if (ec) fail(latest.string() + ": cannot update: " + ec.message());
  fsync_path(dir.parent_path(), true);
}

std::string resolve_checkpoint_dir(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  if (!fs::is_directory(p, ec)) fail(path + ": no such checkpoint folder");
  if (fs::exists(p / CheckpointFiles::state)) return p.string();
  if (fs::exists(p / CheckpointFiles::latest)) {
    std::string name = read_text_file(p / CheckpointFiles::latest);
    while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' '))
      name.pop_back();
    const fs::path target = p / name;
    if (name.empty() || !fs::exists(target / CheckpointFiles::state)) {
      fail(path + ": 'latest' names '" + name + "', which is not a complete checkpoint");
    }
    return target.string();
  }
  fail(path + ": not a checkpoint folder (no " + CheckpointFiles::state + ") nor a run folder (no " +
       CheckpointFiles::latest + ")");
}

TrainerState read_trainer_state(const std::string& dir) {
  const fs::path p = fs::path(dir) / CheckpointFiles::state;
  const std::string text = read_text_file(p);
  try {
    const JsonValue j = parse_json(text);
    TrainerState s;
    s.step = j.at("step").as_int64();
    s.tokens_seen = j.at("tokens_seen").as_int64();
    s.total_steps = j.at("total_steps").as_int64();
    s.run_id = j.at("run_id").as_int64();
    s.run_name = j.at("run_name").as_string();
    s.seed = std::stoull(j.at("seed").as_string());
    s.wall_s = j.at("wall_s").as_double();
    s.mok_version = j.at("mok_version").as_string();
    for (const auto& [k, v] : j.at("counters").as_object()) s.counters[k] = v.as_int64();
    return s;
  } catch (const std::exception& e) {
    fail(p.string() + ": bad trainer state: " + e.what());
  }
}

std::string read_checkpoint_config(const std::string& dir) {
  return read_text_file(fs::path(dir) / CheckpointFiles::config);
}

void load_model_weights(const std::string& dir, const std::vector<Parameter*>& params) {
  const SafeTensorsFile file = SafeTensorsFile::read((fs::path(dir) / CheckpointFiles::model).string());
  for (Parameter* p : params) file.read_into(p->name, p->value);
  if (file.tensors().size() != params.size()) {
    fail(file.path() + ": holds " + std::to_string(file.tensors().size()) +
         " tensors, the model has " + std::to_string(params.size()) +
         " parameters (different model config?)");
  }
}

void load_optimizer_state(const std::string& dir, AdamW& optimizer) {
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
