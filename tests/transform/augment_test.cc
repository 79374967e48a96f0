// The image stage through the C++ API: order rules, determinism, the
// policies' magnitude tables, and a Loader running a recipe (also what the
// sanitizer builds exercise). Exactness against torchvision is tested in
// tests/python/test_augment.py, test_color_ops.py, test_affine_ops.py and
// test_blur_op.py.
#include <gtest/gtest.h>

#include <cstring>
#include <tuple>
#include <vector>

#include "order/rng.h"
#include "stoker/loader.h"
#include "stoker/status.h"
#include "test_util.h"
#include "transform/augment.h"
#include "transform/image_ops.h"
#include "transform/pipeline.h"

namespace stoker::detail {
namespace {

const std::vector<float> kMean{0.485f, 0.456f, 0.406f}, kStd{0.229f, 0.224f, 0.225f};

std::vector<Transform> recipe() {
  return {RandomResizedCrop{40, 48}, RandomHorizontalFlip{}, TrivialAugmentWide{}, Normalize{kMean, kStd},
          RandomErasing{0.5}};
}

TEST(AugmentTest, OrderRulesAreChecked) {
  // No crop, resize or flip after an image-stage op.
  EXPECT_THROW(Pipeline({CenterCrop{32, 32}, ColorJitter{}, RandomHorizontalFlip{}}, DType::kUInt8, Layout::kNCHW),
               Error);
  EXPECT_THROW(Pipeline({CenterCrop{32, 32}, GaussianBlur{}, Resize{16, 16}}, DType::kUInt8, Layout::kNCHW), Error);
  // Only RandomErasing after Normalize; RandomErasing only before Normalize or at the end.
  EXPECT_THROW(Pipeline({CenterCrop{32, 32}, Normalize{kMean, kStd}, RandomInvert{}}, DType::kFloat32, Layout::kNCHW),
               Error);
  EXPECT_NO_THROW(Pipeline(recipe(), DType::kFloat32, Layout::kNCHW));
  // value="random" needs float32.
  RandomErasing random;
  random.random_values = true;
  random.value.clear();
  EXPECT_THROW(Pipeline({CenterCrop{32, 32}, random}, DType::kUInt8, Layout::kNCHW), Error);
  // RandomApply holds image-stage transforms only.
  EXPECT_THROW(check_transform(RandomApply{{RandomHorizontalFlip{}}, 0.5}), Error);
  EXPECT_NO_THROW(check_transform(RandomApply{{ColorJitter{{0.6, 1.4}}, RandomGrayscale{1.0}}, 0.8}));
}

TEST(AugmentTest, TransformsSurviveTheirJson) {
  RandomAffine affine;
  affine.degrees = {-10, 10};
  affine.shear = {-5, 5, -2, 2};
  affine.has_center = true;
  affine.center = {3, 4};
  affine.interpolation = Interpolation::kBilinear;
  const std::vector<Transform> all = {ColorJitter{{0.6, 1.4}, {1, 1}, {0.5, 1.5}, {-0.1, 0.1}},
                                      GaussianBlur{23, 9, {0.1, 2.0}},
                                      RandomSolarize{128.5, 0.3},
                                      affine,
                                      AutoAugment{AutoAugmentPolicy::kSvhn, Interpolation::kNearest, {1, 2, 3}},
                                      RandAugment{3, 12, 31, Interpolation::kBilinear, {0, 0, 0}},
                                      RandomApply{{ColorJitter{{0.6, 1.4}}, GaussianBlur{}}, 0.8}};
  for (const Transform& t : all) {
    const std::string j = transform_to_json(t);
    EXPECT_EQ(transform_repr(transform_from_json(j)), transform_repr(t)) << j;
  }
}

TEST(AugmentTest, TorchLinspaceMatchesTorchsValues) {
  // torch.linspace(0.0, 0.99, 31)[19] of torch 1.13 (CPU, AVX2), and
  // torch.linspace(255, 0, 31)[5], read from torch.
  EXPECT_EQ(torch_linspace(0.0f, 0.99f, 31, 19), 0.6270000338554382f);
  EXPECT_EQ(torch_linspace(0.0f, 0.99f, 31, 0), 0.0f);
  EXPECT_EQ(torch_linspace(0.0f, 0.99f, 31, 30), 0.99f);
  EXPECT_EQ(torch_linspace(255.0f, 0.0f, 31, 5), 212.5f);
  bool is_signed = false;
  EXPECT_EQ(policy_magnitude("wide", "Posterize", 31, 30, 10, 10, &is_signed), 2.0);
  EXPECT_FALSE(is_signed);
  EXPECT_EQ(policy_magnitude("rand", "Posterize", 31, 30, 10, 10, &is_signed), 4.0);
  EXPECT_EQ(policy_magnitude("rand", "Rotate", 31, 30, 10, 10, &is_signed), 30.0);
  EXPECT_TRUE(is_signed);
}

TEST(AugmentTest, PlansAreAFunctionOfTheKeyAndRunOnEveryKernel) {
  // Each policy op at least once over many keys, and the same key twice gives the same bytes.
  Pipeline p(recipe(), DType::kFloat32, Layout::kNCHW);
  ImageBuffer src;
  src.reset(97, 71);
  const auto pixels = stoker::testing::test_pixels(97, 71, 5);
  std::memcpy(src.pixels.data(), pixels.data(), pixels.size());
  Workspace ws;
  std::vector<float> a(p.sample_bytes() / sizeof(float)), b(a.size());
  std::vector<int> kinds(ImageOp::kAffine + 1, 0);
  int erased = 0;
  for (std::uint64_t key = 0; key < 300; ++key) {
    SamplePlan plan;
    Rng r1(key);
    p.plan(97, 71, &r1, &plan);
    for (const ImageOp& op : plan.image_ops) ++kinds[op.kind];
    erased += !plan.erase.empty();
    p.run(plan, src.view(), &ws, a.data());
    SamplePlan again;
    Rng r2(key);
    p.plan(97, 71, &r2, &again);
    p.run(again, src.view(), &ws, b.data());
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << key;
  }
  for (auto k : {ImageOp::kBrightness, ImageOp::kContrast, ImageOp::kSaturation, ImageOp::kSharpness,
                 ImageOp::kSolarize, ImageOp::kPosterize, ImageOp::kAutocontrast, ImageOp::kEqualize,
                 ImageOp::kAffine}) {
    EXPECT_GT(kinds[k], 0) << "op kind " << static_cast<int>(k) << " never drawn in 300 samples";
  }
  EXPECT_GT(erased, 100);  // p = 0.5 over 300: 150 +- 9
  EXPECT_LT(erased, 200);
}

TEST(AugmentTest, BlurIsTheSameOnEveryInstructionSet) {
  // The AVX2 build of the blur must round every product and sum as the baseline build does.
  for (auto [w, h, k] : {std::tuple{224, 224, 23}, {37, 23, 5}, {9, 40, 17}, {64, 48, 1}}) {
    ImageBuffer a, b;
    a.reset(w, h);
    const auto pixels = stoker::testing::test_pixels(w, h, static_cast<std::uint32_t>(w * h));
    std::memcpy(a.pixels.data(), pixels.data(), pixels.size());
    b = a;
    ImageOpScratch sa, sb;
    gaussian_blur(&a, k, k, 1.7, 1.7, &sa, /*allow_avx2=*/true);
    gaussian_blur(&b, k, k, 1.7, 1.7, &sb, /*allow_avx2=*/false);
    EXPECT_EQ(std::memcmp(a.pixels.data(), b.pixels.data(), pixels.size()), 0) << w << "x" << h << " k" << k;
  }
}

TEST(AugmentTest, LoaderBatchesDoNotDependOnTheThreadCount) {
  stoker::testing::TempDir d;
  std::string list = "path,label\n";
  for (int i = 0; i < 12; ++i) {
    const int w = 40 + (i * 7) % 50, h = 36 + (i * 13) % 40;
    const std::string name = "img" + std::to_string(i) + ".jpg";
    stoker::testing::write_file(d.file(name), stoker::testing::encode_jpeg(stoker::testing::test_pixels(w, h, i), w, h));
    list += name + "," + std::to_string(i) + "\n";
  }
  stoker::testing::write_file(d.file("list.csv"), list);
  auto epoch = [&](int threads) {
    LoaderOptions o;
    o.batch_size = 4;
    o.threads = threads;
    o.shuffle = true;
    o.seed = 3;
    o.transforms = recipe();
    o.transforms.insert(o.transforms.begin() + 2,
                        RandomApply{{ColorJitter{{0.6, 1.4}, {0.6, 1.4}, {0.6, 1.4}, {-0.1, 0.1}}}, 0.8});
    o.transforms.insert(o.transforms.begin() + 3, GaussianBlur{5, 5, {0.1, 2.0}});
    o.cache.progress = Progress::kOff;
    Loader l({d.file("list.csv")}, o);
    std::vector<float> out;
    for (const Batch& b : l) {
      const auto* p = static_cast<const float*>(testing::images_of(b));
      out.insert(out.end(), p, p + testing::image_bytes_of(b) / sizeof(float));
    }
    return out;
  };
  const auto one = epoch(1), two = epoch(2);
  ASSERT_EQ(one.size(), 12u * 3 * 40 * 48);
  EXPECT_EQ(one, two);
}

TEST(AugmentTest, ViewsAreCutFromOneDecodeAndDrawnPerCopy) {
  stoker::testing::TempDir d;
  std::string list = "path,label\n";
  for (int i = 0; i < 6; ++i) {
    const int w = 50 + (i * 11) % 40, h = 40 + (i * 7) % 30;
    const std::string name = "v" + std::to_string(i) + ".jpg";
    stoker::testing::write_file(d.file(name), stoker::testing::encode_jpeg(stoker::testing::test_pixels(w, h, i), w, h));
    list += name + "," + std::to_string(i) + "\n";
  }
  stoker::testing::write_file(d.file("list.csv"), list);
  const std::vector<Transform> global = {RandomResizedCrop{32, 32, {0.4, 1.0}}, RandomHorizontalFlip{}};
  auto epoch = [&](int threads, bool views) {
    LoaderOptions o;
    o.batch_size = 3;
    o.threads = threads;
    o.seed = 9;
    o.dtype = DType::kUInt8;
    o.cache.progress = Progress::kOff;
    if (views) {
      o.views = {{"global", 2, global}, {"local", 3, {RandomResizedCrop{12, 12, {0.05, 0.4}}, RandomVerticalFlip{}}}};
    } else {
      o.transforms = global;
    }
    Loader l({d.file("list.csv")}, o);
    std::vector<std::vector<std::uint8_t>> out(2);
    for (const Batch& b : l) {
      const TensorView* g = views ? b.tensor("global") : &b.tensors()[0];
      const auto* p = static_cast<const std::uint8_t*>(g->data);
      out[0].insert(out[0].end(), p, p + g->bytes);
      if (views) {
        EXPECT_EQ(g->dims, (std::vector<std::int64_t>{3, 2, 3, 32, 32}));
        const TensorView* loc = b.tensor("local");
        EXPECT_EQ(loc->dims, (std::vector<std::int64_t>{3, 3, 3, 12, 12}));
        const auto* q = static_cast<const std::uint8_t*>(loc->data);
        out[1].insert(out[1].end(), q, q + loc->bytes);
      }
    }
    return out;
  };
  const auto one = epoch(1, true), two = epoch(2, true), plain = epoch(2, false);
  EXPECT_EQ(one, two);
  // Copy 0 of the first view draws what the plain transform list draws; copy 1 its own.
  const std::size_t image = 3 * 32 * 32;
  ASSERT_EQ(one[0].size(), 6 * 2 * image);
  ASSERT_EQ(plain[0].size(), 6 * image);
  for (std::size_t i = 0; i < 6; ++i) {
    const auto copy0 = one[0].begin() + static_cast<std::ptrdiff_t>(2 * i * image);
    EXPECT_TRUE(std::equal(copy0, copy0 + static_cast<std::ptrdiff_t>(image), plain[0].begin() + static_cast<std::ptrdiff_t>(i * image)));
    EXPECT_FALSE(std::equal(copy0 + static_cast<std::ptrdiff_t>(image), copy0 + static_cast<std::ptrdiff_t>(2 * image),
                            plain[0].begin() + static_cast<std::ptrdiff_t>(i * image)));
  }
}

}  // namespace
}  // namespace stoker::detail
