// Minimal XML well-formedness check for the SVG output (xmllint is not installed here): balanced, properly
// nested tags, quoted attributes, no stray '<' or '&' in text. Enough to catch broken writers.
#pragma once
#include <string>
#include <vector>

inline bool xml_well_formed(const std::string& s, std::string& why) {
  std::vector<std::string> stack;
  size_t i = 0;
  bool root_seen = false;
  while (i < s.size()) {
    if (s[i] == '&') {
      auto semi = s.find(';', i);
      if (semi == std::string::npos || semi - i > 8) return why = "bare & at " + std::to_string(i), false;
      i = semi + 1;
      continue;
    }
    if (s[i] != '<') {
      if (s[i] == '>') return why = "stray > at " + std::to_string(i), false;
      ++i;
      continue;
    }
    if (s.compare(i, 2, "<?") == 0) {
      auto e = s.find("?>", i);
      if (e == std::string::npos) return why = "unterminated <?", false;
      i = e + 2;
      continue;
    }
    if (s.compare(i, 4, "<!--") == 0) {
      auto e = s.find("-->", i);
      if (e == std::string::npos) return why = "unterminated comment", false;
      i = e + 3;
      continue;
    }
    // tag: scan to '>' honouring quotes
    size_t j = i + 1;
    char q = 0;
    for (; j < s.size(); ++j) {
      if (q) {
        if (s[j] == q) q = 0;
        else if (s[j] == '<') return why = "< inside attribute at " + std::to_string(j), false;
      } else if (s[j] == '"' || s[j] == '\'') {
        q = s[j];
      } else if (s[j] == '>') {
        break;
      } else if (s[j] == '<') {
        return why = "< inside tag at " + std::to_string(j), false;
      }
    }
    if (j >= s.size()) return why = "unterminated tag", false;
    std::string tag = s.substr(i + 1, j - i - 1);
    bool closing = !tag.empty() && tag[0] == '/';
    bool self = !tag.empty() && tag.back() == '/';
    std::string name = tag.substr(closing ? 1 : 0);
    name = name.substr(0, name.find_first_of(" \t\n/"));
    if (name.empty()) return why = "empty tag name", false;
    if (closing) {
      if (stack.empty() || stack.back() != name) return why = "mismatched </" + name + ">", false;
      stack.pop_back();
    } else if (!self) {
      if (stack.empty() && root_seen) return why = "second root element", false;
      root_seen = true;
      stack.push_back(name);
    }
    i = j + 1;
  }
  if (!stack.empty()) return why = "unclosed <" + stack.back() + ">", false;
  if (!root_seen) return why = "no root element", false;
  return true;
}
