// The reference implementation of archi_api.h: the NPU overlay run functionally on the CPU,
// number for number as `archi emulate --strategy persistent` runs it (emulate/card.py):
//   fpga_matvec  per matvec of a program, the input slice quantized to INT8 with one scale
//                (its largest magnitude maps to 127, round half to even), INT8 x INT8
//                products summed in int32, then times the row's weight scale and the
//                input's scale in FP32; the matvecs' results added.
//   LSTM cell    gates = W x + U h + b (PyTorch gate order i, f, g, o), then
//                c = sig(f) c + sig(i) tanh(g), h = sig(o) tanh(c), all FP32.
// CPU calls in FP32; sums are taken in double (numpy sums pairwise), so host values agree
// with the emulation's to a few FP32 ulps, not bit for bit.
#include "archi_api.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>

namespace archi {
namespace {

[[noreturn]] void fail(const std::string& what) { host_fail(what); }

struct Segment {  // one matvec's weights: rows x cols INT8, a scale per row
  int cols = 0;
  std::vector<int8_t> q;
  std::vector<float> scale;
};
struct Block {
  int rows = 0;
  std::vector<Segment> segments;
  std::vector<float> bias;  // an LSTM cell's, else empty
};
struct Program {
  std::string kind;  // matvec | lstm_cell
  int in_len = 0, out_len = 0;
  std::vector<int> segments;  // the cols of each fpga_matvec of the chain
};
struct Card {
  std::map<std::string, Program> programs;
  std::map<std::string, Block> mrfs;
  std::map<std::string, Vec> cell_state;
  Vec input, output;
};

std::string root = ".";
std::vector<Card> cards;

Card& card_at(int card) {
  if (card < 0 || card >= static_cast<int>(cards.size()))
    fail("card " + std::to_string(card) + " does not exist");
  return cards[card];
}

std::ifstream open_file(const std::string& path, std::ios::openmode mode = std::ios::in) {
  std::ifstream in(root + "/" + path, mode);
  if (!in) fail("cannot read " + root + "/" + path);
  return in;
}

template <class T>
void read_into(std::ifstream& in, T* data, size_t count, const std::string& what) {
  if (!in.read(reinterpret_cast<char*>(data), static_cast<std::streamsize>(count * sizeof(T))))
    fail("truncated " + what);
}

int32_t read_int(std::ifstream& in, const std::string& what) {
  int32_t v = 0;
  read_into(in, &v, 1, what);
  return v;
}

void check_magic(std::ifstream& in, const char* magic, const std::string& what) {
  char got[4];
  read_into(in, got, 4, what);
  if (std::string(got, 4) != magic) fail(what + " is not an archi " + magic + " file");
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

Vec npu_matvec(const Block& block, const Vec& input) {
  Vec out(block.rows, 0.0f);
  size_t start = 0;
  for (size_t k = 0; k < block.segments.size(); ++k) {
    const Segment& seg = block.segments[k];
    float top = 0.0f;
    for (int c = 0; c < seg.cols; ++c) top = std::max(top, std::fabs(input[start + c]));
    float sx = top / 127.0f;
    if (sx == 0.0f) sx = 1.0f;
    std::vector<int32_t> qx(seg.cols);
    for (int c = 0; c < seg.cols; ++c)
      qx[c] = static_cast<int32_t>(std::clamp(std::nearbyint(input[start + c] / sx), -127.0f, 127.0f));
    start += seg.cols;
    for (int r = 0; r < block.rows; ++r) {
      int32_t acc = 0;
      const int8_t* w = seg.q.data() + static_cast<size_t>(r) * seg.cols;
      for (int c = 0; c < seg.cols; ++c) acc += static_cast<int32_t>(w[c]) * qx[c];
      float y = static_cast<float>(acc) * seg.scale[r] * sx;
      out[r] = k == 0 ? y : out[r] + y;
    }
  }
  return out;
}

Vec map_of(const Vec& a, float (*f)(float)) {
  Vec out(a.size());
  std::transform(a.begin(), a.end(), out.begin(), f);
  return out;
}

void same_length(const Vec& a, const Vec& b, const char* call) {
  if (a.size() != b.size()) fail(std::string(call) + ": lengths differ");
}

}  // namespace

Vec cpu_add(const Vec& a, const Vec& b) {
  same_length(a, b, "cpu_add");
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
  return out;
}

Vec cpu_mul(const Vec& a, const Vec& b) {
  same_length(a, b, "cpu_mul");
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] * b[i];
  return out;
}

Vec cpu_reduce(const Vec& a) { return {static_cast<float>(std::accumulate(a.begin(), a.end(), 0.0))}; }

Vec cpu_dot(const Vec& a, const Vec& b) {
  same_length(a, b, "cpu_dot");
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return {static_cast<float>(s)};
}

Vec cpu_axpy(float a, const Vec& x, const Vec& y) {
  same_length(x, y, "cpu_axpy");
  Vec out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = a * x[i] + y[i];
  return out;
}

Vec cpu_tanh(const Vec& a) { return map_of(a, [](float x) { return std::tanh(x); }); }
Vec cpu_exp(const Vec& a) { return map_of(a, [](float x) { return std::exp(x); }); }
Vec cpu_log(const Vec& a) { return map_of(a, [](float x) { return std::log(x); }); }

Vec cpu_softmax(const Vec& a) {
  float top = *std::max_element(a.begin(), a.end());
  Vec e(a.size());
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i) sum += e[i] = std::exp(a[i] - top);
  float total = static_cast<float>(sum);
  for (float& x : e) x /= total;
  return e;
}

Vec cpu_matvec(const Vec& v, const Mat& m) {
  if (static_cast<int>(v.size()) != m.rows) fail("cpu_matvec: vector and matrix rows differ");
  Vec out(m.cols);
  for (int c = 0; c < m.cols; ++c) {
    double s = 0.0;
    for (int r = 0; r < m.rows; ++r) s += static_cast<double>(v[r]) * m.data[static_cast<size_t>(r) * m.cols + c];
    out[c] = static_cast<float>(s);
  }
  return out;
}

Idx cpu_pickTop(const Vec& a, int n) {
  Idx order(a.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return a[x] > a[y]; });
  order.resize(std::min<size_t>(n, order.size()));
  return order;
}

Vec cpu_embed(const Mat& table, int index) {
  if (index < 0 || index >= table.rows) fail("cpu_embed: no row " + std::to_string(index));
  auto begin = table.data.begin() + static_cast<long>(index) * table.cols;
  return Vec(begin, begin + table.cols);
}

Vec cpu_concat(std::initializer_list<Vec> parts) {
  Vec out;
  for (const Vec& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

void host_fail(const std::string& what) {
  std::fprintf(stderr, "archi_api: %s\n", what.c_str());
  std::exit(1);
}

void host_open(const std::string& build_dir, int count) {
  root = build_dir;
  cards.assign(count, Card{});
}

void fpga_pgm(int card, const std::string& program) {
  std::string path = "cards/card" + std::to_string(card) + "/programs/" + program + ".ovl";
  std::ifstream in = open_file(path);
  Program p;
  std::string word, name;
  if (!(in >> word >> name >> p.kind >> p.in_len >> p.out_len) || word != "program")
    fail(path + ": no program header");
  std::string op;
  int length = 0, cols = 0;
  while (in >> op >> length >> cols)
    if (op == "fpga_matvec") p.segments.push_back(cols);
  card_at(card).programs[program] = p;
}

void fpga_ld_mrfs(int card, const std::string& block) {
  std::string path = "cards/card" + std::to_string(card) + "/mrfs/" + block + ".bin";
  std::ifstream in = open_file(path, std::ios::binary);
  check_magic(in, "AMRF", path);
  Block b;
  b.rows = read_int(in, path);
  int count = read_int(in, path), has_bias = read_int(in, path);
  for (int k = 0; k < count; ++k) {
    Segment s;
    s.cols = read_int(in, path);
    s.q.resize(static_cast<size_t>(b.rows) * s.cols);
    s.scale.resize(b.rows);
    read_into(in, s.q.data(), s.q.size(), path);
    read_into(in, s.scale.data(), s.scale.size(), path);
    b.segments.push_back(std::move(s));
  }
  if (has_bias) {
    b.bias.resize(b.rows);
    read_into(in, b.bias.data(), b.bias.size(), path);
  }
  card_at(card).mrfs[block] = std::move(b);
}

void fpga_ld_input(int card, const Vec& x) { card_at(card).input = x; }

void fpga_execute(int card, const std::string& program, const std::string& read_state,
                  const std::string& write_state) {
  Card& c = card_at(card);
  auto p = c.programs.find(program);
  if (p == c.programs.end()) fail("fpga_execute of " + program + " before fpga_pgm");
  auto b = c.mrfs.find(program);
  if (b == c.mrfs.end()) fail("fpga_execute of " + program + " before fpga_ld_mrfs");
  if (static_cast<int>(c.input.size()) != p->second.in_len) fail(program + ": input length");
  Vec y = npu_matvec(b->second, c.input);
  if (p->second.kind == "matvec") {
    c.output = y;
    return;
  }
  size_t u = y.size() / 4;
  auto found = c.cell_state.find(read_state);
  Vec cell = found == c.cell_state.end() ? Vec(u, 0.0f) : found->second;
  Vec h(u);
  for (size_t k = 0; k < u; ++k) {
    float i = y[k] + b->second.bias[k], f = y[u + k] + b->second.bias[u + k];
    float g = y[2 * u + k] + b->second.bias[2 * u + k], o = y[3 * u + k] + b->second.bias[3 * u + k];
    cell[k] = sigmoid(f) * cell[k] + sigmoid(i) * std::tanh(g);
    h[k] = sigmoid(o) * std::tanh(cell[k]);
  }
  c.cell_state[write_state] = cell;
  c.output = h;
}

Vec fpga_get_out(int card) { return card_at(card).output; }

Mat host_tensor(const std::string& name) {
  std::string path = "host/data/" + name + ".bin";
  std::ifstream in = open_file(path, std::ios::binary);
  check_magic(in, "AHST", path);
  Mat m;
  m.rows = read_int(in, path);
  m.cols = read_int(in, path);
  m.data.resize(static_cast<size_t>(m.rows) * std::max(m.cols, 1));
  read_into(in, m.data.data(), m.data.size(), path);
  return m;
}

Vec host_vector(const std::string& name) { return host_tensor(name).data; }

Idx host_tokens(const std::string& name) {
  std::ifstream in = open_file("host/data/" + name + ".txt");
  Idx out;
  for (int t; in >> t;) out.push_back(t);
  return out;
}

Vec host_row(const Mat& m, int row) { return cpu_embed(m, row); }

Vec host_slice(const Vec& v, int start, int stop) { return Vec(v.begin() + start, v.begin() + stop); }

Vec host_zeros(int length) { return Vec(length, 0.0f); }

Mat host_stack(std::initializer_list<Vec> vectors, bool rows) {
  Mat m;
  int n = static_cast<int>(vectors.size()), width = static_cast<int>(vectors.begin()->size());
  m.rows = rows ? n : width;
  m.cols = rows ? width : n;
  m.data.resize(static_cast<size_t>(n) * width);
  int i = 0;
  for (const Vec& v : vectors) {
    for (int k = 0; k < width; ++k) m.data[rows ? i * width + k : k * n + i] = v[k];
    ++i;
  }
  return m;
}

Kept host_best(std::vector<Candidate> candidates, int k) {
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.from != b.from ? a.from < b.from : a.token < b.token;
  });
  candidates.resize(std::min<size_t>(k, candidates.size()));
  return candidates;
}

std::string state_key(const std::string& cell, int parity, int hypothesis) {
  return cell + "/" + std::to_string(parity) + "." + std::to_string(hypothesis);
}

void print_output(const std::string& name, const Vec& v) {
  std::printf("%s 1 %zu", name.c_str(), v.size());
  for (float x : v) std::printf(" %.9g", x);
  std::printf("\n");
}

void print_output(const std::string& name, const Mat& m) {
  std::printf("%s %d %d", name.c_str(), m.rows, m.cols);
  for (float x : m.data) std::printf(" %.9g", x);
  std::printf("\n");
}

void print_tokens(const std::string& name, const Idx& tokens) {
  std::printf("%s %zu", name.c_str(), tokens.size());
  for (int t : tokens) std::printf(" %d", t);
  std::printf("\n");
}

}  // namespace archi
