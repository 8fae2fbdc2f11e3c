// Token dataset and batch sampling: byte counts, bits per byte, deterministic train rows
// that depend only on (seed, step, micro, row), targets shifted by one, windows in range,
// and validation windows that are fixed and cover the split.
#include <QtTest>

#include <cmath>
#include <set>

#include "core/data/batch_sampler.h"
#include "core/data/bpe_tokenizer.h"
#include "core/data/byte_tokenizer.h"
#include "core/data/token_dataset.h"
#include "core/util/thread_pool.h"

namespace {
mok::CorpusSplit small_split() {
  mok::CorpusSplit s;
  for (int i = 0; i < 6; ++i) {
    std::string text;
    for (int k = 0; k < 200; ++k) {
      text.append("doc").append(std::to_string(i));
      text.append(" word").append(std::to_string(k % 37)).append(" ");
    }
    std::string name = "t";
    name += std::to_string(i);  // (not "t" + ...: GCC 12 warns falsely on that form)
    s.train.push_back({name, text});
  }
  s.val.push_back({"v0", std::string(1500, 'v')});
  s.val.push_back({"v1", "the last validation document \xC3\xA9"});
  return s;
}

// Position of `window` (seq_len+1 tokens) inside `data`, or -1.
int64_t find_window(const std::vector<int32_t>& data, const int32_t* tokens, const int32_t* targets, int seq_len) {
  for (size_t s = 0; s + seq_len < data.size(); ++s) {
    if (std::equal(tokens, tokens + seq_len, data.begin() + s) && data[s + seq_len] == targets[seq_len - 1]) {
      return static_cast<int64_t>(s);
    }
  }
  return -1;
}
}  // namespace

class TestDataBatches : public QObject {
  Q_OBJECT
 private slots:
  void datasetCountsBytes() {
    const mok::CorpusSplit split = small_split();
    const mok::TokenDataset ds = mok::build_token_dataset(split, mok::ByteTokenizer());
    QCOMPARE(ds.vocab_size, 256);
    QCOMPARE(ds.train_bytes, split.train_bytes() + 2 * int64_t(split.train.size() - 1));
    QCOMPARE(int64_t(ds.train.size()), ds.train_bytes);
    QCOMPARE(int64_t(ds.val.size()), ds.val_bytes);
    QCOMPARE(ds.val_bytes_per_token(), 1.0);

    std::vector<std::string_view> texts;
    for (const auto& d : split.train) texts.emplace_back(d.text);
    const auto bpe = mok::BpeTokenizer::train(texts, 300);
    const mok::TokenDataset b = mok::build_token_dataset(split, bpe);
    QCOMPARE(b.train_bytes, ds.train_bytes);
    QVERIFY(b.train.size() < ds.train.size());
    // Joined with "\n\n": decoding the tokens gives the documents back.
    QCOMPARE(bpe.decode(b.val), split.val[0].text + "\n\n" + split.val[1].text);
    QCOMPARE(b.val_bytes_per_token(), double(b.val_bytes) / double(b.val.size()));
  }

  void datasetIsThreadCountIndependent() {
    const mok::CorpusSplit split = small_split();
    std::vector<std::string_view> texts;
    for (const auto& d : split.train) texts.emplace_back(d.text);
    const auto bpe = mok::BpeTokenizer::train(texts, 320);
    const mok::TokenDataset one = mok::build_token_dataset(split, bpe);
    mok::ThreadPool pool(3);
    mok::ScopedThreadPool scope(pool);
    const mok::TokenDataset three = mok::build_token_dataset(split, bpe);
    QCOMPARE(three.train, one.train);
    QCOMPARE(three.val, one.val);
  }

  void bitsPerByteFormula() {
    // 1 nat/token with 1 byte/token = 1/ln 2 bits per byte.
    QCOMPARE(mok::bits_per_byte(1.0, 100, 1.0), 1.0 / std::log(2.0));
    // Tokens twice as long: half the bits per byte.
    QCOMPARE(mok::bits_per_byte(std::log(2.0) * 3.0, 50, 2.0), 1.5);
    QCOMPARE(mok::bits_per_byte(2.0, 0, 1.0), 0.0);
  }

  void trainBatchesAreDeterministicShiftedAndInRange() {
    const mok::TokenDataset ds = mok::build_token_dataset(small_split(), mok::ByteTokenizer());
    const int batch = 8, seq = 32;
    std::vector<int32_t> x(batch * seq), y(batch * seq), x2(batch * seq), y2(batch * seq);
    mok::sample_train_batch(ds, 42, 7, 1, batch, seq, x.data(), y.data());
    mok::sample_train_batch(ds, 42, 7, 1, batch, seq, x2.data(), y2.data());
    QCOMPARE(x, x2);
    QCOMPARE(y, y2);
    for (int r = 0; r < batch; ++r) {
      const int64_t start = mok::train_window_start(ds, 42, 7, 1, r, seq);
      QVERIFY(start >= 0 && start + seq < int64_t(ds.train.size()));
      for (int t = 0; t < seq; ++t) {
        QCOMPARE(x[r * seq + t], ds.train[start + t]);
        QCOMPARE(y[r * seq + t], ds.train[start + t + 1]);
        if (t + 1 < seq) QCOMPARE(y[r * seq + t], x[r * seq + t + 1]);
      }
      // A rank reading only row r gets the same row.
      std::vector<int32_t> rx(seq), ry(seq);
      mok::sample_train_row(ds, 42, 7, 1, r, seq, rx.data(), ry.data());
      QVERIFY(std::equal(rx.begin(), rx.end(), x.begin() + r * seq));
      QVERIFY(std::equal(ry.begin(), ry.end(), y.begin() + r * seq));
    }
    // Another step, micro-batch or seed picks other windows.
    std::set<int64_t> starts;
    for (int64_t step = 0; step < 4; ++step)
      for (int micro = 0; micro < 2; ++micro)
        for (uint64_t seed : {1ull, 2ull}) starts.insert(mok::train_window_start(ds, seed, step, micro, 0, seq));
    QVERIFY(starts.size() >= 14);
  }

  void trainWindowsCoverTheRange() {
    const mok::TokenDataset ds = mok::build_token_dataset(small_split(), mok::ByteTokenizer());
    const int seq = 16;
    const int64_t range = int64_t(ds.train.size()) - seq;
    int64_t lo = range, hi = -1;
    for (int64_t row = 0; row < 20000; ++row) {
      const int64_t s = mok::train_window_start(ds, 9, 0, 0, row, seq);
      QVERIFY(s >= 0 && s < range);
      lo = std::min(lo, s);
      hi = std::max(hi, s);
    }
    QVERIFY(lo < range / 100);
    QVERIFY(hi > range - range / 100);
  }

  void valBatchesAreFixedAndCoverTheSplit() {
    const mok::TokenDataset ds = mok::build_token_dataset(small_split(), mok::ByteTokenizer());
    const int seq = 20, batch = 4;
    const int64_t w = mok::val_window_count(ds, seq);
    QCOMPARE(w, int64_t((ds.val.size() - 1) / seq));
    std::set<int64_t> starts;
    for (int64_t j = 0; j < w; ++j) {
      const int64_t s = mok::val_window_start(ds, j, seq);
      QVERIFY(s % seq == 0 && s + seq < int64_t(ds.val.size()));
      starts.insert(s);
    }
    QCOMPARE(int64_t(starts.size()), w);  // W windows: each exactly once
    QCOMPARE(mok::val_window_start(ds, w + 3, seq), mok::val_window_start(ds, 3, seq));
    // The first few windows are spread over the split, not bunched at its start.
    QVERIFY(std::max(mok::val_window_start(ds, 1, seq), mok::val_window_start(ds, 2, seq)) > int64_t(ds.val.size()) / 2);

    std::vector<int32_t> x(batch * seq), y(batch * seq);
    mok::val_batch(ds, 2, batch, seq, x.data(), y.data());
    for (int r = 0; r < batch; ++r) {
      const int64_t s = mok::val_window_start(ds, 2 * batch + r, seq);
      QCOMPARE(find_window(ds.val, x.data() + r * seq, y.data() + r * seq, seq) >= 0, true);
      QCOMPARE(x[r * seq], ds.val[s]);
      QCOMPARE(y[r * seq + seq - 1], ds.val[s + seq]);
    }
  }

  void tooSmallSplitsAreRejected() {
    mok::CorpusSplit s;
    s.train.push_back({"t", "short"});
    s.val.push_back({"v", "tiny"});
    const mok::TokenDataset ds = mok::build_token_dataset(s, mok::ByteTokenizer());
    std::vector<int32_t> x(64), y(64);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, mok::sample_train_batch(ds, 1, 0, 0, 1, 8, x.data(), y.data()));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, mok::val_batch(ds, 0, 1, 8, x.data(), y.data()));
    mok::sample_train_batch(ds, 1, 0, 0, 1, 4, x.data(), y.data());  // 5 tokens fit seq_len 4
    QCOMPARE(x[0], int32_t('s'));
    QCOMPARE(y[3], int32_t('t'));
  }
};

QTEST_GUILESS_MAIN(TestDataBatches)
#include "test_data_batches.moc"
