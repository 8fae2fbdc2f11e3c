// safetensors files: round trip of F32/I64/U8 tensors and metadata, the on-disk layout
// (header length, alignment, sorted keys), and clear errors naming the file on truncated
// files, bad headers and wrong shapes. Also the JSON reader the header uses (parse_json).
#include <QtTest>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/train/safetensors.h"
#include "core/util/json_reader.h"

namespace fs = std::filesystem;
using mok::MemCategory;
using mok::MemTag;
using mok::SafeDType;
using mok::SafeTensorsError;
using mok::SafeTensorsFile;
using mok::SafeTensorView;
using mok::Tensor;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Expects `fn` to throw SafeTensorsError whose message names `path` and contains `needle`.
template <class Fn>
bool throws_naming(Fn fn, const std::string& path, const std::string& needle) {
  try {
    fn();
  } catch (const SafeTensorsError& e) {
    const std::string msg = e.what();
    if (msg.rfind(path, 0) != 0 || msg.find(needle) == std::string::npos) {
      qWarning("unexpected message: %s", msg.c_str());
      return false;
    }
    return true;
  }
  return false;
}

}  // namespace

class TestCheckpointSafetensors : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::string path_;

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    path_ = (dir_.path() + "/t.safetensors").toStdString();
    Tensor w({2, 3}, MemTag{MemCategory::parameters, -1, ""});
    for (int i = 0; i < 6; ++i) w[i] = 0.5f * i - 1.0f;
    const int64_t steps[2] = {7, -3};
    const uint8_t bytes[3] = {1, 2, 255};
    mok::write_safetensors(path_,
                           {mok::safe_view("zeta.w", w),
                            SafeTensorView{"alpha.bytes", SafeDType::u8, {3}, bytes},
                            SafeTensorView{"step", SafeDType::i64, {2}, steps}},
                           {{"format", "pt"}, {"run", "a \"quoted\" name"}});
  }

  void roundTrip() {
    const SafeTensorsFile f = SafeTensorsFile::read(path_);
    QCOMPARE(f.tensors().size(), size_t(3));
    QCOMPARE(f.metadata().at("format"), std::string("pt"));
    QCOMPARE(f.metadata().at("run"), std::string("a \"quoted\" name"));
    Tensor w({2, 3});
    f.read_into("zeta.w", w);
    for (int i = 0; i < 6; ++i) QCOMPARE(w[i], 0.5f * i - 1.0f);
    QCOMPARE(f.read_i64("step"), (std::vector<int64_t>{7, -3}));
    const auto& b = f.get("alpha.bytes");
    QCOMPARE(b.dtype, SafeDType::u8);
    QCOMPARE(int(b.bytes[2]), 255);
  }

  void layoutFollowsTheFormat() {
    const std::string raw = slurp(path_);
    uint64_t n = 0;
    std::memcpy(&n, raw.data(), 8);
    QCOMPARE((8 + n) % 8, uint64_t(0));  // data starts 8-byte aligned
    const std::string header = raw.substr(8, n);
    const mok::JsonValue h = mok::parse_json(header);
    // Keys sorted by name after __metadata__.
    std::vector<std::string> keys;
    for (const auto& [k, v] : h.as_object()) keys.push_back(k);
    QCOMPARE(keys, (std::vector<std::string>{"__metadata__", "alpha.bytes", "step", "zeta.w"}));
    // I64 first (8-byte elements), then F32, then U8: each aligned, no holes.
    QCOMPARE(h.at("step").at("data_offsets").as_array()[0].as_int64(), int64_t(0));
    QCOMPARE(h.at("zeta.w").at("data_offsets").as_array()[0].as_int64(), int64_t(16));
    QCOMPARE(h.at("alpha.bytes").at("data_offsets").as_array()[1].as_int64(), int64_t(43));
    QCOMPARE(raw.size(), size_t(8 + n + 43));
    QCOMPARE(h.at("zeta.w").at("dtype").as_string(), std::string("F32"));
  }

  void truncatedFileIsAnError() {
    const std::string raw = slurp(path_);
    const std::string bad = (dir_.path() + "/truncated.safetensors").toStdString();
    spit(bad, raw.substr(0, raw.size() - 5));
    QVERIFY(throws_naming([&] { SafeTensorsFile::read(bad); }, bad, "truncated"));
    spit(bad, raw.substr(0, 20));  // inside the header
    QVERIFY(throws_naming([&] { SafeTensorsFile::read(bad); }, bad, "truncated"));
    spit(bad, raw.substr(0, 4));   // inside the length
    QVERIFY(throws_naming([&] { SafeTensorsFile::read(bad); }, bad, "truncated"));
  }

  void badHeaderIsAnError() {
    std::string raw = slurp(path_);
    const std::string bad = (dir_.path() + "/badheader.safetensors").toStdString();
    std::string broken = raw;
    broken[8] = '[';  // header no longer a valid object
    spit(bad, broken);
    QVERIFY(throws_naming([&] { SafeTensorsFile::read(bad); }, bad, "bad header"));
    // Absurd header length (e.g. a text file).
    spit(bad, "hello world, this is not a tensor file at all");
    QVERIFY(throws_naming([&] { SafeTensorsFile::read(bad); }, bad, "header"));
    // Offsets inconsistent with the shape.
    std::string header = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}";
    while ((8 + header.size()) % 8) header += ' ';
    uint64_t n = header.size();
    std::string file(reinterpret_cast<const char*>(&n), 8);
    file += header + std::string(4, '\0');
    spit(bad, file);
    QVERIFY(throws_naming([&] { SafeTensorsFile::read(bad); }, bad, "data_offsets"));
    // Unknown dtype.
    header = "{\"x\":{\"dtype\":\"C64\",\"shape\":[2],\"data_offsets\":[0,4]}}";
    n = header.size();
    file = std::string(reinterpret_cast<const char*>(&n), 8) + header + std::string(4, '\0');
    spit(bad, file);
    QVERIFY(throws_naming([&] { SafeTensorsFile::read(bad); }, bad, "C64"));
    // Extra bytes after the last tensor.
    spit(bad, raw + "junk");
    QVERIFY(throws_naming([&] { SafeTensorsFile::read(bad); }, bad, "after the last tensor"));
  }

  void wrongShapeOrDtypeIsAnError() {
    const SafeTensorsFile f = SafeTensorsFile::read(path_);
    Tensor wrong({3, 2});
    QVERIFY(throws_naming([&] { f.read_into("zeta.w", wrong); }, path_, "expected [3, 2]"));
    Tensor any({2});
    QVERIFY(throws_naming([&] { f.read_into("step", any); }, path_, "expected F32"));
    QVERIFY(throws_naming([&] { f.get("missing"); }, path_, "missing"));
    QVERIFY(throws_naming([&] { SafeTensorsFile::read(path_ + ".nope"); }, path_ + ".nope", "cannot open"));
  }

  void duplicateNamesAreRejectedOnWrite() {
    Tensor a({1});
    const std::string p = (dir_.path() + "/dup.safetensors").toStdString();
    QVERIFY(throws_naming([&] { mok::write_safetensors(p, {mok::safe_view("a", a), mok::safe_view("a", a)}); },
                          p, "duplicate"));
  }

  void jsonReader() {
    const mok::JsonValue v = mok::parse_json(
        " {\"a\": [1, -2.5e3, true, null], \"s\": \"x\\n\\u00e9\\ud83d\\ude00\", \"big\": 9007199254740993} ");
    QCOMPARE(v.at("a").as_array().size(), size_t(4));
    QCOMPARE(v.at("a").as_array()[1].as_double(), -2500.0);
    QVERIFY(v.at("a").as_array()[3].is_null());
    QCOMPARE(v.at("s").as_string(), std::string("x\n\xc3\xa9\xf0\x9f\x98\x80"));
    QCOMPARE(v.at("big").as_int64(), int64_t(9007199254740993));  // exact beyond 2^53
    for (const char* bad : {"{", "[1,]", "{\"a\":1,\"a\":2}", "01", "\"abc", "tru", "1 2", "{\"a\" 1}"}) {
      QVERIFY_THROWS_EXCEPTION(mok::JsonParseError, mok::parse_json(bad));
    }
    QVERIFY_THROWS_EXCEPTION(mok::JsonParseError, mok::parse_json(std::string(200, '[')));
  }

  // What a malformed header or state file is told: the place (byte, line, column) and the fault.
  void jsonReaderErrorsNameThePlace() {
    // The duplicate names the key and where its second copy starts (an escaped quote inside
    // the key is not its start).
    const std::string dup = "{\"a\\\"b\": 1,\n \"a\\\"b\": 2}";  // {"a\"b": 1, ⏎ "a\"b": 2}
    QCOMPARE(json_error(dup), std::string("JSON at byte 13 (line 2, column 2): duplicate key \"a\"b\""));
    // Depth: max_depth arrays and objects inside one another are fine, one more is refused at its '['.
    QCOMPARE(mok::parse_json("[[{\"a\":1}]]", 3).as_array()[0].as_array()[0].at("a").as_int64(), int64_t(1));
    QCOMPARE(json_error("[[[[1]]]]", 3),
             std::string("JSON at byte 3 (line 1, column 4): nesting too deep (more than 3 arrays and objects inside "
                         "one another)"));
    // Syntax errors: the library's description, at the offending byte.
    QCOMPARE(json_error("{\"a\" 1}"),
             std::string("JSON at byte 5 (line 1, column 6): syntax error while parsing object separator - "
                         "unexpected number literal; expected ':'"));
    QCOMPARE(json_error("[1,]"), std::string("JSON at byte 3 (line 1, column 4): syntax error while parsing value - "
                                             "unexpected ']'; expected '[', '{', or a literal"));
    QCOMPARE(json_error("{"), std::string("JSON at byte 1 (line 1, column 2): syntax error while parsing object key - "
                                          "unexpected end of input; expected string literal"));
    // What the lexer had read is quoted, its last 40 bytes, control characters escaped.
    const std::string long_bad = "[\"" + std::string(100, 'x') + "\x01\"]";
    QCOMPARE(json_error(long_bad),
             std::string("JSON at byte 102 (line 1, column 103): syntax error while parsing value - invalid string: "
                         "control character U+0001 (SOH) must be escaped to \\u0001; last read: '…") +
                 std::string(32, 'x') + "<U+0001>'");
  }

  // Checks the reader gained with nlohmann-json's lexer: strings must be UTF-8, numbers finite.
  void jsonReaderRefusesInvalidUtf8AndOverflow() {
    // 0xE9 starts a 3-byte sequence; the quote after it (byte 14) is where it breaks.
    QVERIFY(json_error("{\"name\": \"caf\xe9\"}").find("byte 14") != std::string::npos);
    QVERIFY(json_error("{\"name\": \"caf\xe9\"}").find("ill-formed UTF-8 byte") != std::string::npos);
    QVERIFY(json_error("\"\xed\xa0\x80\"").find("ill-formed UTF-8 byte") != std::string::npos);  // a surrogate
    QVERIFY(json_error("\"\xc0\xaf\"").find("ill-formed UTF-8 byte") != std::string::npos);      // overlong '/'
    QCOMPARE(mok::parse_json("\"caf\xc3\xa9\"").as_string(), std::string("caf\xc3\xa9"));
    QCOMPARE(json_error("[1e400]"), std::string("JSON at byte 5 (line 1, column 6): number overflow parsing '1e400'"));
    // Integers: exact to 64 bits, beyond that an error naming the number when read as one.
    const mok::JsonValue n = mok::parse_json("[18446744073709551615, -9223372036854775808, 18446744073709551616, 1.5]");
    QCOMPARE(n.as_array()[0].as_uint64(), uint64_t(18446744073709551615ull));
    QCOMPARE(n.as_array()[1].as_int64(), std::numeric_limits<int64_t>::min());
    QVERIFY(throws_with([&] { n.as_array()[0].as_int64(); }, "integer out of range: 18446744073709551615"));
    QVERIFY(throws_with([&] { n.as_array()[1].as_uint64(); }, "expected a non-negative integer"));
    QVERIFY(throws_with([&] { n.as_array()[2].as_uint64(); }, "integer out of range: 18446744073709551616"));
    QVERIFY(throws_with([&] { n.as_array()[3].as_int64(); }, "expected an integer, found 1.5"));
    QCOMPARE(n.as_array()[3].as_double(), 1.5);
    // A header with a non-UTF-8 tensor name is refused naming the file.
    std::string header = "{\"w\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
    uint64_t len = header.size();
    const std::string bad = (dir_.path() + "/latin1.safetensors").toStdString();
    spit(bad, std::string(reinterpret_cast<const char*>(&len), 8) + header + "x");
    QVERIFY(throws_naming([&] { SafeTensorsFile::read(bad); }, bad, "ill-formed UTF-8 byte"));
  }

 private:
  // The message of the JsonParseError that parsing `text` throws ("no error" when none).
  static std::string json_error(std::string_view text, int max_depth = 64) {
    try {
      mok::parse_json(text, max_depth);
    } catch (const mok::JsonParseError& e) {
      return e.what();
    }
    return "no error";
  }

  template <class Fn>
  static bool throws_with(Fn fn, const std::string& needle) {
    try {
      fn();
    } catch (const std::runtime_error& e) {
      if (std::string(e.what()).find(needle) != std::string::npos) return true;
      qWarning("message: %s", e.what());
    }
    return false;
  }
};

QTEST_GUILESS_MAIN(TestCheckpointSafetensors)
#include "test_checkpoint_safetensors.moc"
