// safetensors with 16-bit floats (what Hugging Face folders hold): BF16 and F16 tensors
// written beside F32 ones keep the layout rules (8-byte aligned data start, larger elements
// first, no holes) and read back widened exactly; the bf16 rounding is to nearest, ties to
// even; F16 bit patterns decode to their IEEE values (subnormals, infinities, signs).
#include <QtTest>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "core/train/safetensors.h"
#include "core/util/half_float.h"
#include "core/util/json_reader.h"

using namespace mok;

class TestHfSafetensors : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

 private slots:
  void bf16RoundsToNearestEven() {
    QCOMPARE(float_to_bf16(1.0f), uint16_t(0x3f80));
    QCOMPARE(float_to_bf16(1.0f + 0x1.0p-8f), uint16_t(0x3f80));      // halfway: ties to even (down)
    QCOMPARE(float_to_bf16(1.0f + 3 * 0x1.0p-8f), uint16_t(0x3f82));  // halfway: ties to even (up)
    QCOMPARE(float_to_bf16(1.0f + 0x1.8p-8f), uint16_t(0x3f81));      // above halfway: up
    QCOMPARE(float_to_bf16(-2.0f), uint16_t(0xc000));
    QVERIFY(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
    QCOMPARE(bf16_to_float(0x3f81), 1.0f + 0x1.0p-7f);
  }

  void f16DecodesIeeeHalf() {
    QCOMPARE(f16_to_float(0x3c00), 1.0f);
    QCOMPARE(f16_to_float(0xc000), -2.0f);
    QCOMPARE(f16_to_float(0x7bff), 65504.0f);
    QCOMPARE(f16_to_float(0x0001), 0x1.0p-24f);  // smallest subnormal
    QCOMPARE(f16_to_float(0x03ff), 1023 * 0x1.0p-24f);
    QCOMPARE(f16_to_float(0x0400), 0x1.0p-14f);  // smallest normal
    QVERIFY(std::isinf(f16_to_float(0x7c00)));
    QVERIFY(std::signbit(f16_to_float(0x8000)));
  }

  void sixteenBitTensorsRoundTrip() {
    QVERIFY(dir_.isValid());
    const std::string path = (dir_.path() + "/half.safetensors").toStdString();
    const std::vector<float> f32 = {1.5f, -2.25f, 3.0f};
    const std::vector<uint16_t> bf16 = {float_to_bf16(0.5f), float_to_bf16(-7.0f), float_to_bf16(1e-3f)};
    const std::vector<uint16_t> f16 = {0x3c00, 0x0001, 0xc000, 0x7bff, 0x3555};
    write_safetensors(path,
                      {{"b.bf16", SafeDType::bf16, {3}, bf16.data(), nullptr},
                       {"a.f32", SafeDType::f32, {3}, f32.data(), nullptr},
                       {"c.f16", SafeDType::f16, {5}, f16.data(), nullptr}},
                      {{"format", "pt"}});
    // Layout: the F32 tensor first in the data (larger elements), then the 2-byte ones by name.
    std::ifstream in(path, std::ios::binary);
    uint64_t header_len = 0;
    in.read(reinterpret_cast<char*>(&header_len), 8);
    QCOMPARE((8 + header_len) % 8, uint64_t(0));
    std::string header(header_len, '\0');
    in.read(header.data(), static_cast<std::streamsize>(header_len));
    const JsonValue h = parse_json(header);
    QCOMPARE(h.at("a.f32").at("data_offsets").as_array()[0].as_int64(), int64_t(0));
    QCOMPARE(h.at("b.bf16").at("data_offsets").as_array()[0].as_int64(), int64_t(12));
    QCOMPARE(h.at("c.f16").at("data_offsets").as_array()[0].as_int64(), int64_t(18));
    QCOMPARE(h.at("c.f16").at("data_offsets").as_array()[1].as_int64(), int64_t(28));
    QCOMPARE(h.at("b.bf16").at("dtype").as_string(), std::string("BF16"));

    const SafeTensorsFile f = SafeTensorsFile::read(path);
    QVERIFY(f.get("c.f16").dtype == SafeDType::f16);
    QVERIFY(f.read_f32("a.f32") == f32);
    QVERIFY(f.read_f32("b.bf16") == (std::vector<float>{0.5f, -7.0f, bf16_to_float(float_to_bf16(1e-3f))}));
    const std::vector<float> half = f.read_f32("c.f16");
    QCOMPARE(half[1], 0x1.0p-24f);
    QCOMPARE(half[3], 65504.0f);
    QCOMPARE(half[4], f16_to_float(0x3555));
    // A 16-bit tensor is not read as F32 into a Tensor.
    Tensor t({3});
    QVERIFY_THROWS_EXCEPTION(SafeTensorsError, f.read_into("b.bf16", t));
  }
};

QTEST_GUILESS_MAIN(TestHfSafetensors)
#include "test_hf_safetensors.moc"
