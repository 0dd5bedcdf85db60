#include <cstring>
#include <sstream>
#include <string>
#include <vector>
class CondorError;
class Condor_Auth_Passwd {
public:
  static bool generate_token(const std::string &, const std::string &, const std::vector<std::string> &, long,
                             std::string &, int, CondorError *);
};
void param_insert(const char *, const char *);
extern "C" void birdbath_param_insert(const char *name, const char *value) { param_insert(name, value); }
extern "C" int birdbath_generate_token(const char *id, const char *kid, const char *authz, long lifetime,
                                       char *out, int size) {
  std::vector<std::string> list;
  std::istringstream words(authz);
  for (std::string word; words >> word;) list.push_back(word);
  std::string token;
  if (!Condor_Auth_Passwd::generate_token(id, kid, list, lifetime, token, 0, nullptr)) return -1;
  if ((int)token.size() >= size) return -2;
  std::memcpy(out, token.c_str(), token.size() + 1);
  return (int)token.size();
}
