// Order keys of floats (torch's quantile order: numbers by value, every NaN after +inf) and the
// element-wise passes over rows, written branch-free so that each ISA variant vectorises them. No
// std:: templates here: each variant's copy stays its own (see docs/design.md).
//
// Included inside namespace kwker::quantile_detail::<isa> (and ::keys by select_ranks.cc, for Keys).

template <typename Float, typename Bits>
struct Keys {
  static constexpr Bits kSign = Bits{1} << (8 * sizeof(Bits) - 1);
  static constexpr Bits kInfinity = sizeof(Float) == 4 ? Bits(0x7F800000u) : Bits(0x7FF0000000000000ull);
  static Bits bits(Float x) {
    Bits b;
    __builtin_memcpy(&b, &x, sizeof b);
    return b;
  }
  static bool is_nan(Bits b) { return static_cast<Bits>(b & ~kSign) > kInfinity; }
  // Sign-magnitude flipped: the order of the numbers' values; NaNs the largest key.
  // Masks, not conditionals: the compiler keeps the loops below vector code.
  static Bits key(Float x) {
    const Bits b = bits(x);
    const Bits negative = static_cast<Bits>(Bits{0} - (b >> (8 * sizeof(Bits) - 1)));  // all ones if negative
    const Bits nan = static_cast<Bits>(Bits{0} - static_cast<Bits>(is_nan(b)));
    return static_cast<Bits>((b ^ (negative | kSign)) | nan);
  }
  static Float value(Bits k) {  // k is the key of a number
    const Bits b = (k & kSign) ? static_cast<Bits>(k & ~kSign) : static_cast<Bits>(~k);
    Float x;
    __builtin_memcpy(&x, &b, sizeof x);
    return x;
  }
};

template <typename Float, typename Bits>
void row_keys(const Float* x, int64_t n, Bits* keys, Bits* low, Bits* high) {
  Bits lo = static_cast<Bits>(~Bits{0}), hi = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Bits k = Keys<Float, Bits>::key(x[i]);
    keys[i] = k;
    lo = k < lo ? k : lo;
    hi = k > hi ? k : hi;
  }
  *low = lo;
  *high = hi;
}

template <typename Float, typename Bits>
int64_t row_nans(const Float* x, int64_t n, unsigned* zeros) {
  using K = Keys<Float, Bits>;
  int64_t nans = 0;
  Bits negative_zero = 0, positive_zero = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Bits b = K::bits(x[i]);
    nans += K::is_nan(b);
    negative_zero |= b == K::kSign;
    positive_zero |= b == 0;
  }
  *zeros |= (negative_zero ? 1u : 0u) | (positive_zero ? 2u : 0u);
  return nans;
}
