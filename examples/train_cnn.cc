// Trains a small CNN with libtorch from a stoker loader: the C++ quick start.
//
//   train_cnn DATA_DIR [--steps 300] [--size 64] [--batch-size 32] [--threads 0]
//
// Each batch is wrapped with torch::from_blob without a copy; the tensor's
// deleter owns a copy of the stoker::Batch, so the ring buffer is reused only
// after libtorch is done with it.
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
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
  auto s = b.shape();
  auto* keep = new stoker::Batch(b);
  return torch::from_blob(keep->mutable_images(), {s[0], s[1], s[2], s[3]},
                          [keep](void*) { delete keep; }, torch::kFloat32);
}

torch::Tensor labels_of(const stoker::Batch& b) {
  auto* keep = new stoker::Batch(b);
  return torch::from_blob(const_cast<std::int64_t*>(keep->labels()), {static_cast<std::int64_t>(b.size())},
                          [keep](void*) { delete keep; }, torch::kInt64);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: train_cnn DATA_DIR [--steps N] [--size S] [--batch-size B] [--threads T]\n");
    return 2;
  }
  std::string data = argv[1];
  int steps = 300, size = 64, batch_size = 32, threads = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (a == "--steps") steps = v;
    else if (a == "--size") size = v;
    else if (a == "--batch-size") batch_size = v;
    else if (a == "--threads") threads = v;
  }
  torch::manual_seed(0);
  torch::set_num_threads(1);  // the loader's threads take the other cores

  stoker::LoaderOptions opt;
  opt.batch_size = static_cast<std::size_t>(batch_size);
  opt.shuffle = true;
  opt.seed = 0;
  opt.drop_last = true;
  opt.threads = threads;
  opt.transforms = {stoker::RandomResizedCrop{size, size, {0.25, 1.0}}, stoker::RandomHorizontalFlip{},
                    stoker::Normalize{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}}};
  try {
    stoker::Loader loader(data, opt);
    const int classes = static_cast<int>(loader.source().classes().size());
    std::printf("train_cnn: %s, %d classes, %zu batches/epoch\n", loader.source().describe().c_str(), classes,
                loader.num_batches());
    Net net(classes);
    torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    int step = 0;
    double loss_sum = 0, correct = 0, seen = 0;
    for (std::uint64_t epoch = 0; step < steps; ++epoch) {
      loader.set_epoch(epoch);
      for (const stoker::Batch& batch : loader) {
        torch::Tensor x = images_of(batch), y = labels_of(batch);
        torch::Tensor logits = net->forward(x);
        torch::Tensor loss = torch::nn::functional::cross_entropy(logits, y);
        sgd.zero_grad();
        loss.backward();
        sgd.step();
        loss_sum += loss.item<double>();
        correct += logits.argmax(1).eq(y).sum().item<double>();
        seen += static_cast<double>(y.size(0));
        if (++step % 50 == 0) {
          std::printf("step %4d  epoch %llu  loss %.3f  train accuracy %.3f\n", step,
                      static_cast<unsigned long long>(epoch), loss_sum / 50, correct / seen);
          loss_sum = correct = seen = 0;
        }
        if (step >= steps) break;
      }
    }
    auto st = loader.stats();
    std::printf("loader: %llu samples, decode %.1fs, transform %.1fs, consumer waited %.1fs of %.1fs\n",
                static_cast<unsigned long long>(st.samples), st.decode_s, st.transform_s, st.consumer_wait_s,
                st.wall_s);
  } catch (const stoker::Error& e) {
    std::fprintf(stderr, "train_cnn: %s\n", e.what());
    return 1;
  }
  return 0;
}
