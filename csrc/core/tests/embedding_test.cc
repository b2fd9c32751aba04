// kwker/embedding.h and kwker/coalesce.h against torch's loops written out literally (Embedding.cpp's
// per-index add_stub, EmbeddingBag.cpp's max loop and index_add_ per column, SparseTensor.cpp's
// coalesce walk over a std::sort / stable sort of the keys), on every ISA; and float16.h's roundings.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "float16.h"
#include "kwker/coalesce.h"
#include "kwker/embedding.h"
#include "sort_test_util.h"

namespace kwker_test {
namespace {

TEST(Float16, NarrowingInvertsWideningAndRoundsMidpointsToEven) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    if ((h & 0x7FFF) <= 0x7C00) EXPECT_EQ(kwker::float_to_half(kwker::half_to_float(bits)), bits) << h;
    if ((h & 0x7FFF) <= 0x7F80) EXPECT_EQ(kwker::float_to_bfloat16(kwker::bfloat16_to_float(bits)), bits) << h;
  }
  for (uint32_t h = 0; h < 0x7BFF; ++h) {  // the midpoint of neighbours h, h + 1 goes to the even one
    const float mid = (kwker::half_to_float(static_cast<uint16_t>(h)) + kwker::half_to_float(static_cast<uint16_t>(h + 1))) / 2;
    EXPECT_EQ(kwker::float_to_half(mid), (h & 1) ? h + 1 : h) << h;
    EXPECT_EQ(kwker::float_to_half(std::nextafter(mid, 0.0f)), h) << h;
    EXPECT_EQ(kwker::float_to_half(std::nextafter(mid, 1e9f)), h + 1) << h;
  }
  EXPECT_EQ(kwker::float_to_half(65520.0f), 0x7C00);  // rounds up to infinity
  EXPECT_EQ(kwker::float_to_half(std::nanf("")), 0x7E00);
  EXPECT_EQ(kwker::float_to_bfloat16(-std::nanf("")), 0x7FC0);
}

// torch's arithmetic for one element: vector body T(fma(g, alpha, acc)), scalar tail T(acc + T(alpha g)).
float add_torch(float acc, float g, float alpha, bool body) { return body ? std::fma(g, alpha, acc) : acc + alpha * g; }

struct BackwardCase {
  int64_t n, dim, num_weights, padding_idx;
  bool scale;
};

void check_backward(DType dtype, const BackwardCase& c, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> pick(-2, c.num_weights + 1);  // some out of range: skipped
  std::vector<int64_t> indices(static_cast<size_t>(c.n));
  for (auto& i : indices) i = pick(rng);
  if (c.scale) {  // then every index must be in range
    for (auto& i : indices) i = (i % c.num_weights + c.num_weights) % c.num_weights;
  }
  std::normal_distribution<float> normal;
  const bool wide16 = dtype == DType::kBFloat16 || dtype == DType::kFloat16;
  std::vector<float> grad(static_cast<size_t>(c.n * c.dim));
  std::vector<uint16_t> grad16(grad.size());
  for (size_t i = 0; i < grad.size(); ++i) {
    const float v = normal(rng);
    grad16[i] = dtype == DType::kBFloat16 ? kwker::float_to_bfloat16(v) : kwker::float_to_half(v);
    grad[i] = wide16 ? (dtype == DType::kBFloat16 ? kwker::bfloat16_to_float(grad16[i]) : kwker::half_to_float(grad16[i])) : v;
  }
  const auto round16 = [&](float x) {
    return dtype == DType::kBFloat16 ? kwker::bfloat16_to_float(kwker::float_to_bfloat16(x))
                                     : kwker::half_to_float(kwker::float_to_half(x));
  };
  std::vector<int64_t> counts(static_cast<size_t>(c.num_weights), 0);
  for (int64_t k : indices) {
    if (k >= 0 && k < c.num_weights) ++counts[static_cast<size_t>(k)];
  }
  constexpr int64_t kTorchStep = 32;
  std::vector<float> expect(static_cast<size_t>(c.num_weights * c.dim), 0.0f);
  for (int64_t i = 0; i < c.n; ++i) {
    const int64_t k = indices[static_cast<size_t>(i)];
    if (k == c.padding_idx || k < 0 || k >= c.num_weights) continue;
    const double scale = c.scale ? 1.0 / static_cast<double>(counts[static_cast<size_t>(k)]) : 1.0;
    const float alpha = wide16 ? round16(static_cast<float>(scale)) : static_cast<float>(scale);
    for (int64_t d = 0; d < c.dim; ++d) {
      float& acc = expect[static_cast<size_t>(k * c.dim + d)];
      const float g = grad[static_cast<size_t>(i * c.dim + d)];
      if (wide16) {
        const bool body = d < c.dim - c.dim % kTorchStep;
        acc = round16(body ? std::fma(g, alpha, acc) : acc + round16(alpha * g));
      } else {
        acc = add_torch(acc, g, alpha, true);
      }
    }
  }
  for_each_isa([&](Isa) {
    std::vector<float> got(expect.size(), 0.0f);
    std::vector<uint16_t> got16(expect.size(), 0);
    kwker::EmbeddingBackwardProblem p{};
    p.dtype = dtype;
    p.index_type = kwker::IndexType::kInt64;
    p.grad = wide16 ? static_cast<const void*>(grad16.data()) : grad.data();
    p.indices = indices.data();
    p.num_indices = c.n;
    p.dim = c.dim;
    p.num_weights = c.num_weights;
    p.padding_idx = c.padding_idx;
    p.scale_grad_by_freq = c.scale;
    p.torch_vector_elements = kTorchStep;
    p.grad_weight = wide16 ? static_cast<void*>(got16.data()) : got.data();
    ASSERT_TRUE(kwker::embedding_dense_backward(p));
    for (size_t e = 0; e < expect.size(); ++e) {
      const float v = wide16 ? (dtype == DType::kBFloat16 ? kwker::bfloat16_to_float(got16[e]) : kwker::half_to_float(got16[e]))
                             : got[e];
      ASSERT_EQ(std::memcmp(&v, &expect[e], sizeof v), 0) << "element " << e << ": " << v << " vs " << expect[e];
    }
  });
}

TEST(EmbeddingDenseBackward, MatchesTorchsLoopOnEveryTailAndScale) {
  std::mt19937_64 rng(7);
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    for (int64_t dim : {1, 7, 31, 32, 33, 64, 100}) {
      for (bool scale : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "dtype " << static_cast<int>(dtype) << " dim " << dim << " scale " << scale);
        check_backward(dtype, {300, dim, 40, 5, scale}, rng);
      }
    }
  }
}

TEST(EmbeddingDenseBackward, ReportsNaN) {
  std::vector<float> grad(8, 1.0f), out(16, 0.0f);
  grad[3] = std::nanf("");
  const int64_t indices[2] = {1, 0};
  kwker::EmbeddingBackwardProblem p{};
  p.dtype = DType::kFloat32;
  p.index_type = kwker::IndexType::kInt64;
  p.grad = grad.data();
  p.indices = indices;
  p.num_indices = 2;
  p.dim = 4;
  p.num_weights = 4;
  p.padding_idx = -1;
  p.torch_vector_elements = 32;
  p.grad_weight = out.data();
  EXPECT_FALSE(kwker::embedding_dense_backward(p));
}

TEST(EmbeddingBagMax, MatchesTorchsLoopWithTiesPaddingAndEmptyBags) {
  std::mt19937_64 rng(11);
  const int64_t num_weights = 50, dim = 37, n = 400;
  std::vector<float> weight(static_cast<size_t>(num_weights * dim));
  std::uniform_int_distribution<int> few(0, 3);  // heavy ties
  for (auto& w : weight) w = static_cast<float>(few(rng)) - 1.5f;
  weight[5] = -0.0f;
  weight[6] = 0.0f;
  weight[7 * dim + 3] = std::nanf("");
  std::uniform_int_distribution<int64_t> pick(0, num_weights - 1);
  std::vector<int32_t> indices(n);
  for (auto& i : indices) i = static_cast<int32_t>(pick(rng));
  std::vector<int32_t> offsets = {0, 0, 3, 3, 50, 120, 121, 300, 400};  // empty bags included
  const int64_t bags = static_cast<int64_t>(offsets.size()), pad = 9;
  // torch's loop
  std::vector<float> out(static_cast<size_t>(bags * dim), 0.0f);
  std::vector<int32_t> mi(out.size(), 0), size(bags), o2b(n);
  for (int64_t b = 0; b < bags; ++b) {
    const int64_t stop = b + 1 < bags ? offsets[b + 1] : n;
    size[b] = static_cast<int32_t>(stop - offsets[b]);
    bool first = true;
    for (int64_t i = offsets[b]; i < stop; ++i) {
      o2b[i] = static_cast<int32_t>(b);
      if (indices[i] == pad) { --size[b]; continue; }
      for (int64_t d = 0; d < dim; ++d) {
        const float w = weight[indices[i] * dim + d];
        if (first || w > out[b * dim + d]) { out[b * dim + d] = w; mi[b * dim + d] = indices[i]; }
      }
      first = false;
    }
  }
  for_each_isa([&](Isa) {
    std::vector<float> got(out.size(), 7.0f);
    std::vector<int32_t> got_mi(out.size(), 7), got_size(bags, 7), got_o2b(n, 7);
    kwker::BagMaxProblem p{};
    p.dtype = DType::kFloat32;
    p.index_type = kwker::IndexType::kInt32;
    p.weight = weight.data();
    p.num_weights = num_weights;
    p.dim = dim;
    p.weight_row_stride = dim;
    p.indices = indices.data();
    p.num_indices = n;
    p.offsets = offsets.data();
    p.num_bags = bags;
    p.padding_idx = pad;
    p.output = got.data();
    p.max_indices = got_mi.data();
    p.bag_size = got_size.data();
    p.offset2bag = got_o2b.data();
    ASSERT_TRUE(kwker::embedding_bag_max(p));
    EXPECT_EQ(std::memcmp(got.data(), out.data(), out.size() * sizeof(float)), 0);
    EXPECT_EQ(got_mi, mi);
    EXPECT_EQ(got_size, size);
    EXPECT_EQ(got_o2b, o2b);
    std::vector<int32_t> bad = offsets;
    bad[3] = 2;  // decreasing: torch's answer is not Kwker's to give
    p.offsets = bad.data();
    EXPECT_FALSE(kwker::embedding_bag_max(p));
  });
}

// The pages an element range falls on, by brute force: one mark per byte.
void mark_bytes(std::vector<uint8_t>& pages, int64_t page_bytes, int64_t offset, int64_t begin, int64_t bytes) {
  for (int64_t b = begin; b < begin + bytes; ++b) pages[static_cast<size_t>((offset + b) / page_bytes)] = 1;
}

int64_t marked(const std::vector<uint8_t>& pages) {
  int64_t n = 0;
  for (uint8_t p : pages) n += p;
  return n;
}

TEST(PagesWritten, DenseBackwardNamesThePagesOfItsRowsAndStopsPastTheLimit) {
  std::mt19937_64 rng(3);
  const int64_t num_weights = 500, dim = 37, n = 60, padding = 17;
  std::vector<int64_t> indices(n);
  std::uniform_int_distribution<int64_t> pick(-3, num_weights + 3);  // out-of-range ids write nothing
  for (auto& i : indices) i = pick(rng);
  indices[5] = padding;
  kwker::EmbeddingBackwardProblem p{};
  p.dtype = DType::kFloat32;
  p.index_type = kwker::IndexType::kInt64;
  p.indices = indices.data();
  p.num_indices = n;
  p.dim = dim;
  p.num_weights = num_weights;
  p.padding_idx = padding;
  const int64_t row = dim * 4, table = num_weights * row;
  for (int64_t page : {64, 256, 4096}) {
    for (int64_t offset : {int64_t{0}, page / 2, page - 4}) {
      SCOPED_TRACE(::testing::Message() << "page " << page << " offset " << offset);
      const size_t spanned = static_cast<size_t>((offset + table + page - 1) / page);
      std::vector<uint8_t> expect(spanned, 0), got(spanned, 0);
      for (int64_t k : indices) {
        if (k >= 0 && k < num_weights && k != padding) mark_bytes(expect, page, offset, k * row, row);
      }
      EXPECT_EQ(kwker::embedding_dense_backward_pages(p, {page, offset, table, got.data()}), marked(expect));
      EXPECT_EQ(got, expect);
      std::vector<uint8_t> scratch(spanned, 0);
      EXPECT_EQ(kwker::embedding_dense_backward_pages(p, {page, offset, 3, scratch.data()}), 4);  // past the limit
    }
  }
}

TEST(PagesWritten, MaxBackwardNamesThePagesOfItsElementsSkippingEmptyBags) {
  std::mt19937_64 rng(4);
  const int64_t num_weights = 300, dim = 5, bags = 40;
  std::vector<int32_t> mi(static_cast<size_t>(bags * dim)), size(bags);
  std::uniform_int_distribution<int32_t> pick(-1, num_weights);
  for (auto& m : mi) m = pick(rng);
  for (int64_t b = 0; b < bags; ++b) size[b] = b % 4 == 0 ? 0 : 3;
  kwker::BagMaxBackwardProblem p{};
  p.dtype = DType::kFloat64;
  p.index_type = kwker::IndexType::kInt32;
  p.max_indices = mi.data();
  p.max_indices_stride0 = 1;  // column-major: strides are followed
  p.max_indices_stride1 = bags;
  p.bag_size = size.data();
  p.bag_size_stride = 1;
  p.num_bags = bags;
  p.dim = dim;
  p.num_weights = num_weights;
  const int64_t table = num_weights * dim * 8;
  for (int64_t page : {64, 512}) {
    const int64_t offset = 24;
    const size_t spanned = static_cast<size_t>((offset + table + page - 1) / page);
    std::vector<uint8_t> expect(spanned, 0), got(spanned, 0);
    for (int64_t b = 0; b < bags; ++b) {
      for (int64_t d = 0; d < dim; ++d) {
        const int64_t w = mi[static_cast<size_t>(b + d * bags)];
        if (size[b] != 0 && w >= 0 && w < num_weights) mark_bytes(expect, page, offset, (w * dim + d) * 8, 8);
      }
    }
    EXPECT_EQ(kwker::embedding_bag_max_backward_pages(p, {page, offset, table, got.data()}), marked(expect));
    EXPECT_EQ(got, expect);
  }
}

// sizes {7, 9}: keys packed with positions for the radix sort and split back into indices; {2^40, 5,
// 2^20}: keys too wide for either (kwker/sort.h, indices read back).
TEST(Coalesce, MatchesTorchsWalkOverItsSort) {
  std::mt19937_64 rng(5);
  const std::vector<std::vector<int64_t>> size_sets = {{7, 9}, {int64_t{1} << 40, 5, int64_t{1} << 20}};
  for (const auto& sizes : size_sets) {
    const int64_t sparse_dim = static_cast<int64_t>(sizes.size());
    for (int64_t nnz : {2, 16, 17, 100, 5000, 40000}) {
      for (bool stable : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "sparse_dim " << sparse_dim << " nnz " << nnz << " stable " << stable);
        // Few distinct values per dim (long runs), some at the top of huge sizes.
        std::vector<int64_t> indices(static_cast<size_t>(sparse_dim * nnz));
        for (int64_t d = 0; d < sparse_dim; ++d) {
          std::uniform_int_distribution<int64_t> pick(0, sizes[d] < 9 ? sizes[d] - 1 : 8);
          for (int64_t i = 0; i < nnz; ++i) {
            const int64_t v = pick(rng);
            indices[d * nnz + i] = sizes[d] > 9 && v == 8 ? sizes[d] - 1 : v;
          }
        }
        std::normal_distribution<float> normal;
        std::vector<float> values(static_cast<size_t>(2 * nnz));
        for (auto& v : values) v = normal(rng);
        std::vector<uint64_t> keys(static_cast<size_t>(nnz), 0);
        for (int64_t i = 0; i < nnz; ++i) {
          for (int64_t d = 0; d < sparse_dim; ++d) keys[i] = keys[i] * sizes[d] + indices[d * nnz + i];
        }
        const auto perm = oracle_typed<int64_t>(keys, [](uint64_t b) { return static_cast<int64_t>(b); },
                                                SortOrder::kAscending, stable ? TieOrder::kStable : TieOrder::kIntrosort);
        std::vector<int64_t> want_idx;
        std::vector<float> want_val;
        for (size_t j = 0; j < perm.size(); ++j) {
          const int64_t pos = perm[j];
          if (j == 0 || keys[pos] != keys[perm[j - 1]]) {
            want_idx.push_back(pos);
            want_val.push_back(values[2 * pos]);
            want_val.push_back(values[2 * pos + 1]);
          } else {
            want_val[want_val.size() - 2] += values[2 * pos];
            want_val[want_val.size() - 1] += values[2 * pos + 1];
          }
        }
        for_each_isa([&](Isa) {
          std::vector<int64_t> new_indices(indices.size(), -1);
          std::vector<float> new_values(values.size(), 0.0f);
          kwker::CoalesceProblem p{};
          p.dtype = DType::kFloat32;
          p.nnz = nnz;
          p.sparse_dim = sparse_dim;
          p.sizes = sizes.data();
          p.indices = indices.data();
          p.indices_stride0 = nnz;
          p.indices_stride1 = 1;
          p.values = values.data();
          p.block_elements = 2;
          p.torch_sorts_stably = stable;
          p.new_indices = new_indices.data();
          p.new_values = new_values.data();
          const int64_t got = kwker::coalesce(p);
          ASSERT_EQ(got, static_cast<int64_t>(want_idx.size()));
          for (int64_t i = 0; i < got; ++i) {
            for (int64_t d = 0; d < sparse_dim; ++d) ASSERT_EQ(new_indices[d * nnz + i], indices[d * nnz + want_idx[i]]);
          }
          EXPECT_EQ(std::memcmp(new_values.data(), want_val.data(), want_val.size() * sizeof(float)), 0);
          const int64_t saved = indices[0];
          indices[0] = sizes[0];  // outside its size: torch's
          EXPECT_EQ(kwker::coalesce(p), -1);
          indices[0] = saved;
        });
      }
    }
  }
}

}  // namespace
}  // namespace kwker_test
