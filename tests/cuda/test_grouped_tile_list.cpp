// The tile list both grouped GEMM kernels walk (kernels/grouped_tile_list.cuh), on the host:
// every output tile of every non-empty group is listed exactly once, with the column tiles
// fastest, the groups in their order for the rows forms and by decreasing rows for weight_grad,
// and a tile's lookup gives back its group, origin and segment; the persistent kernel's rounds
// take every tile once. Runs without a GPU.
#include <QtTest>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>
#include <tuple>
#include <vector>

#include "kernels/grouped_tile_list.cuh"

using namespace mok::cuda;

namespace {

std::vector<int64_t> offsets_of(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> off = {0};
  for (int64_t s : sizes) off.push_back(off.back() + s);
  return off;
}

// Checks the list of `call` for tiles (tm × tn) against a direct enumeration.
void check_list(const GroupedKernelCall& call, int tm, int tn) {
  GroupedTileList list;
  fill_tile_list(call, tm, tn, list);
  int expected = 0;
  std::vector<int> order(size_t(call.groups));
  std::iota(order.begin(), order.end(), 0);
  const int64_t* off = call.host_offsets;
  if (call.form == GroupedKernelForm::weight_grad)  // largest reduction first, ties by index
    std::sort(order.begin(), order.end(), [off](int a, int b) {
      const int64_t ra = off[a + 1] - off[a], rb = off[b + 1] - off[b];
      return ra != rb ? ra > rb : a < b;
    });
  std::vector<std::tuple<int, int, int>> want;  // (group, m0, n0) in list order
  for (const int g : order) {
    const int64_t m_g = call.host_offsets[g + 1] - call.host_offsets[g];
    if (m_g == 0) continue;
    const int64_t rows = call.form == GroupedKernelForm::weight_grad ? call.k : m_g;
    for (int64_t m0 = 0; m0 < rows; m0 += tm)
      for (int64_t n0 = 0; n0 < call.n; n0 += tn) want.emplace_back(g, int(m0), int(n0));
    expected += int(grouped_group_tiles(call, m_g, tm, tn));
  }
  QCOMPARE(list.tiles, int(want.size()));
  QCOMPARE(list.tiles, expected);
  for (int t = 0; t < list.tiles; ++t) {
    const GroupedTile at = locate_tile(list, t, tm, tn);
    QCOMPARE(std::make_tuple(at.g, at.m0, at.n0), want[size_t(t)]);
    QCOMPARE(int64_t(at.seg0), call.host_offsets[at.g]);
    QCOMPARE(int64_t(at.seg_rows), call.host_offsets[at.g + 1] - call.host_offsets[at.g]);
  }
}

}  // namespace

class TestGroupedTileList : public QObject {
  Q_OBJECT
 private slots:
  void rowsFormsListEveryTileOnce() {
    // empty groups first, in the middle and last; one-row groups; none a multiple of a tile
    const std::vector<int64_t> off = offsets_of({0, 9, 0, 17, 1, 130, 300, 0});
    GroupedKernelCall call;
    call.groups = int(off.size()) - 1;
    call.host_offsets = off.data();
    call.n = 768;
    call.k = 256;
    for (const GroupedKernelForm form : {GroupedKernelForm::rows, GroupedKernelForm::rows_bt}) {
      call.form = form;
      check_list(call, 128, 256);
      check_list(call, 128, 128);
    }
  }

  void weightGradTilesCoverDwOfEveryNonEmptyGroupLargestFirst() {
    // uneven segments with a tie (37, 37): the larger reductions are listed first
    const std::vector<int64_t> off = offsets_of({37, 4100, 0, 1, 37, 0, 900});
    GroupedKernelCall call;
    call.form = GroupedKernelForm::weight_grad;
    call.groups = int(off.size()) - 1;
    call.host_offsets = off.data();
    call.n = 520;  // not a multiple of the tile
    call.k = 200;
    check_list(call, 128, 256);
  }

  void roundsTakeEveryTileOnce() {
    for (const int grid : {1, 3, 132}) {
      for (const int tiles : {0, 1, 5, 132, 133, 384, 400}) {
        std::vector<int> taken(size_t(tiles), 0);
        for (int cta = 0; cta < grid; ++cta)
          for (int round = 0; round * grid < tiles; ++round) {
            const int tile = round_tile(round, cta, grid);
            QVERIFY(tile >= round * grid && tile < (round + 1) * grid);
            if (tile < tiles) ++taken[size_t(tile)];
          }
        QVERIFY(std::all_of(taken.begin(), taken.end(), [](int n) { return n == 1; }));
      }
    }
    // odd rounds run backwards: CTA 0 takes the first tile of round 0 and the last of round 1
    QCOMPARE(round_tile(0, 0, 4), 0);
    QCOMPARE(round_tile(1, 0, 4), 7);
    QCOMPARE(round_tile(2, 0, 4), 8);
  }

  void noGroupsNoTiles() {
    const int64_t off[] = {0};
    GroupedKernelCall call;
    call.host_offsets = off;
    call.n = 64;
    call.k = 64;
    GroupedTileList list;
    fill_tile_list(call, 128, 256, list);
    QCOMPARE(list.tiles, 0);
  }
};

QTEST_APPLESS_MAIN(TestGroupedTileList)
#include "test_grouped_tile_list.moc"
