// The host-offload API of seeds/003 Table I (CPU compute, FPGA compute, communication and
// control), as the application written by `archi build --strategy persistent` calls it.
// archi_api_ref.cpp implements it functionally on the CPU: each card is an NPU overlay
// holding INT8 weight blocks in its MRFs, computing INT8 x INT8 products with int32 sums
// and its vector chain in FP32, as `archi emulate` does; a real runtime links its own.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

namespace archi {

using Vec = std::vector<float>;  // a host vector (FP32)
using Idx = std::vector<int>;    // word indices
struct Mat {                     // a host matrix, row-major
  int rows = 0, cols = 0;
  std::vector<float> data;
};
struct Candidate {  // a beam-search candidate: score, the hypothesis it extends, its word
  double score;
  int from;
  int token;
};
using Kept = std::vector<Candidate>;

// ---- CPU compute (Table I) ----
Vec cpu_add(const Vec& a, const Vec& b);
Vec cpu_mul(const Vec& a, const Vec& b);
Vec cpu_reduce(const Vec& a);                 // a 1-vector: the sum
Vec cpu_dot(const Vec& a, const Vec& b);      // a 1-vector
Vec cpu_axpy(float a, const Vec& x, const Vec& y);
Vec cpu_tanh(const Vec& a);
Vec cpu_exp(const Vec& a);
Vec cpu_softmax(const Vec& a);
Vec cpu_matvec(const Vec& v, const Mat& m);   // v (R) times m (R x C): C
Idx cpu_pickTop(const Vec& a, int n);         // the n largest, largest first, ties to lower
// the extensions an NMT needs (seeds/003 §III: "Our APIs are extensible")
Vec cpu_embed(const Mat& table, int index);
Vec cpu_concat(std::initializer_list<Vec> parts);
Vec cpu_log(const Vec& a);

// ---- communication and control (Table I); FPGA compute runs inside fpga_execute ----
// fpga_pgm loads an overlay program (a chain of fpga_matvec / fpga_add / fpga_mul /
// fpga_tanh / fpga_sigmoid instructions) onto a card; fpga_ld_mrfs places a weight block in
// its matrix register files; fpga_execute runs a loaded program on the card's input, an LSTM
// cell reading its c register `read_state` and writing `write_state` (kept on the card).
void fpga_pgm(int card, const std::string& program);
void fpga_ld_mrfs(int card, const std::string& block);
void fpga_ld_input(int card, const Vec& x);
void fpga_execute(int card, const std::string& program, const std::string& read_state = "",
                  const std::string& write_state = "");
Vec fpga_get_out(int card);

// ---- host memory (no API call) ----
void host_open(const std::string& build_dir, int cards);  // where cards/ and host/data/ are
Mat host_tensor(const std::string& name);
Vec host_vector(const std::string& name);
Idx host_tokens(const std::string& name);
Vec host_row(const Mat& m, int row);
Vec host_slice(const Vec& v, int start, int stop);
Vec host_zeros(int length);
Mat host_stack(std::initializer_list<Vec> vectors, bool rows);
Kept host_best(std::vector<Candidate> candidates, int k);
std::string state_key(const std::string& cell, int parity, int hypothesis);
[[noreturn]] void host_fail(const std::string& what);  // prints `archi_api: what`, exits 1
template <class T>
T host_pick(int index, std::initializer_list<T> options) {
  if (index < 0 || index >= static_cast<int>(options.size()))
    host_fail("host_pick: no option " + std::to_string(index));
  return *(options.begin() + index);
}
void print_output(const std::string& name, const Vec& v);
void print_output(const std::string& name, const Mat& m);
void print_tokens(const std::string& name, const Idx& tokens);

}  // namespace archi
