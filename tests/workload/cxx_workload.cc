// A C++ test subject for symbolization (not profiled): templates, lambdas,
// an anonymous namespace, virtual calls and heavy inlining of the standard
// library, so demangled names and inline chains are compared with
// llvm-symbolizer on the kind of code C++ services are made of.
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include <cstdio>
namespace app { namespace {
template <typename T> struct Box { T v; T get() const { return v; } Box operator+(const Box &o) const { return {v + o.v}; } };
struct Base { virtual ~Base() = default; virtual int run(int) = 0; };
struct Impl : Base { int run(int x) override { auto f = [x](int y) { return x * y + 1; }; return f(x) + f(3); } };
}
std::map<std::string, std::vector<int>> build(int n) {
  std::map<std::string, std::vector<int>> m;
  for (int i = 0; i < n; i++) m[std::to_string(i % 17)].push_back(i);
  return m;
}
template <class F> long apply_all(const std::vector<int> &v, F f) { long s = 0; for (int x : v) s += f(x); return s; }
}
int main(int argc, char **) {
  auto m = app::build(1000 + argc);
  std::unique_ptr<app::Base> b(new app::Impl);
  app::Box<int> a{1}, c{2};
  long s = 0;
  for (auto &kv : m) { std::vector<int> v = kv.second; std::sort(v.rbegin(), v.rend()); s += app::apply_all(v, [&](int x) { return b->run(x) + (a + c).get(); }); }
  std::function<long(long)> g = [](long x) { return x / 3; };
  std::printf("%ld\n", g(s));
}
