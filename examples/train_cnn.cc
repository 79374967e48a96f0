// Trains a small CNN with libtorch from stoker loaders: the C++ quick start.
//
//   train_cnn DATA_DIR [--epochs 3] [--steps 0] [--size 64] [--batch-size 32] [--threads 0] [--holdout 10]
//
// Every 10th (--holdout) image of each class is held out. Per epoch it prints the
// training loss, the held-out accuracy, images/s and the share of the time
// spent waiting for data. Each batch is wrapped with torch::from_blob without
// a copy; the tensor's deleter owns a copy of the stoker::Batch, so the ring
// buffer is reused only after libtorch is done with it.
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "stoker/stoker.h"

namespace {

struct NetImpl : torch::nn::Module {
  explicit NetImpl(int classes) {
    torch::nn::Sequential layers;
    int in = 3;
    for (int out : {16, 32, 64}) {  // conv-bn-relu-pool blocks
      layers->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(1).bias(false)));
      layers->push_back(torch::nn::BatchNorm2d(out));
      layers->push_back(torch::nn::ReLU());
      layers->push_back(torch::nn::MaxPool2d(2));
      in = out;
    }
    features = register_module("features", layers);
    head = register_module("head", torch::nn::Linear(64, classes));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = features->forward(x);
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return head->forward(x);
  }
  torch::nn::Sequential features{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Net);

// A tensor viewing the batch's images; keeps the batch alive.
torch::Tensor images_of(const stoker::Batch& b) {
  auto* keep = new stoker::Batch(b);
  const stoker::TensorView* images = keep->tensor("image");
  return torch::from_blob(images->data, images->dims, [keep](void*) { delete keep; }, torch::kFloat32);
}

torch::Tensor labels_of(const stoker::Batch& b) {
  auto* keep = new stoker::Batch(b);
  return torch::from_blob(keep->tensor("label")->data, {static_cast<std::int64_t>(b.size())},
                          [keep](void*) { delete keep; }, torch::kInt64);
}

// The folder split into train/val list files: every 10th record of a class held out.
std::pair<std::string, std::string> split(const stoker::Source& src, const std::string& dir, int every) {
  std::ofstream train(dir + "/train.csv"), val(dir + "/val.csv");
  train << "path,label\n";
  val << "path,label\n";
  std::map<std::int64_t, int> seen;
  for (std::size_t i = 0; i < src.size(); ++i) {
    std::string path = std::filesystem::absolute(src.key(i)).string();
    (++seen[src.label(i)] % every == 0 ? val : train) << path << "," << src.label(i) << "\n";
  }
  return {dir + "/train.csv", dir + "/val.csv"};
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: train_cnn DATA_DIR [--epochs E] [--steps N] [--size S] [--batch-size B] [--threads T]\n");
    return 2;
  }
  std::string data = argv[1];
  int epochs = 3, max_steps = 0, size = 64, batch_size = 32, threads = 0, holdout = 10;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (a == "--epochs") epochs = v;
    else if (a == "--steps") max_steps = v;
    else if (a == "--size") size = v;
    else if (a == "--batch-size") batch_size = v;
    else if (a == "--threads") threads = v;
    else if (a == "--holdout") holdout = std::max(2, v);
  }
  torch::manual_seed(0);
  torch::set_num_threads(1);  // the loader's threads take the other cores
  try {
    auto folder = stoker::open_source(data);
    const int classes = static_cast<int>(folder->classes().size());
    std::string dir = (std::filesystem::temp_directory_path() / ("train_cnn-" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(dir);
    auto [train_list, val_list] = split(*folder, dir, holdout);

    const stoker::Normalize norm{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
    stoker::LoaderOptions opt;
    opt.batch_size = static_cast<std::size_t>(batch_size);
    opt.shuffle = true;
    opt.drop_last = true;
    opt.threads = threads;
    opt.transforms = {stoker::RandomResizedCrop{size, size, {0.25, 1.0}}, stoker::RandomHorizontalFlip{}, norm};
    stoker::Loader train(train_list, opt);
    stoker::LoaderOptions vopt = opt;
    vopt.shuffle = false;
    vopt.drop_last = false;
    vopt.transforms = {stoker::Resize{size * 8 / 7, 0, 0}, stoker::CenterCrop{size, size}, norm};
    stoker::Loader val(val_list, vopt);
    std::printf("train_cnn: %s: %zu train / %zu held-out images, %d classes, %zu batches/epoch\n", data.c_str(),
                train.num_samples(), val.num_samples(), classes, train.num_batches());

    Net net(classes);
    torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    for (int epoch = 0; epoch < epochs; ++epoch) {
      train.set_epoch(static_cast<std::uint64_t>(epoch));
      net->train();
      double loss_sum = 0, wait = 0;
      std::size_t seen = 0, steps = 0;
      const double t0 = now_s();
      train.start_epoch();
      for (;;) {
        const double w0 = now_s();
        auto batch = train.next();
        wait += now_s() - w0;
        if (!batch) break;
        torch::Tensor x = images_of(*batch), y = labels_of(*batch);
        torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
        sgd.zero_grad();
        loss.backward();
        sgd.step();
        loss_sum += loss.item<double>();
        seen += batch->size();
        if (++steps == static_cast<std::size_t>(max_steps)) break;
      }
      const double elapsed = now_s() - t0;
      net->eval();
      torch::NoGradGuard no_grad;
      double correct = 0, total = 0;
      for (const stoker::Batch& b : val) {
        torch::Tensor y = labels_of(b);
        correct += net->forward(images_of(b)).argmax(1).eq(y).sum().item<double>();
        total += static_cast<double>(b.size());
      }
      std::printf("epoch %d: loss %.3f  held-out accuracy %.3f  %.0f images/s  waited for data %.0f%% of %.1fs\n",
                  epoch, loss_sum / static_cast<double>(std::max<std::size_t>(steps, 1)), correct / total,
                  static_cast<double>(seen) / elapsed, 100 * wait / elapsed, elapsed);
      std::fflush(stdout);
    }
    std::filesystem::remove_all(dir);
  } catch (const stoker::Error& e) {
    std::fprintf(stderr, "train_cnn: %s\n", e.what());
    return 1;
  }
  return 0;
}
